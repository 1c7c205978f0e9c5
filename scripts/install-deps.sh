#!/usr/bin/env bash
# Installs every Debian package fracgpu's build, tests and tools use. Idempotent: when all
# packages are present it changes nothing and needs no network. Each component lists its
# packages in scripts/deps/<component>.txt (one package per line, '#' comments).
#   install-deps.sh          every list and every scripts/deps/*.sh step (build and test all)
#   install-deps.sh --demo   scripts/deps/demo.txt only (what `make demo` builds and runs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lists=("$here"/deps/*.txt)
steps=("$here"/deps/*.sh)
case "${1:-}" in
  "") ;;
  --demo) lists=("$here/deps/demo.txt"); steps=() ;;
  *) echo "install-deps: unknown argument '$1' (expected nothing or --demo)" >&2; exit 2 ;;
esac
mapfile -t wanted < <(cat "${lists[@]}" | sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u)
missing=()
for pkg in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#wanted[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Non-Debian steps (e.g. npm packages of the browser tests): every scripts/deps/*.sh, in name
# order, after the packages. Each must be idempotent and quick when already done.
for step in "${steps[@]}"; do
  [ -e "$step" ] || continue
  bash "$step"
done
