#!/usr/bin/env bash
# Installs every Debian package fracgpu's build, tests and tools use. Idempotent: when all
# packages are present it changes nothing and needs no network. Each component lists its
# packages in scripts/deps/<component>.txt (one package per line, '#' comments).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wanted < <(cat "$here"/deps/*.txt | sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u)
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
for step in "$here"/deps/*.sh; do
  [ -e "$step" ] || continue
  bash "$step"
done
