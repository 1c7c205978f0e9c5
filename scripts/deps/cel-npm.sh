#!/usr/bin/env bash
# npm packages of the CEL tests of deploy/admission-policy.yaml (tests/cel/package.json, pinned
# exactly in package-lock.json): runs `npm ci` there when node_modules is missing or older than the
# lock file. Idempotent; a no-op (no network) when up to date.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dir="$here/tests/cel"
stamp="$dir/node_modules/.fracgpu-lock.sha256"
if ! command -v node >/dev/null; then
  echo "cel-npm: node not found (Debian package nodejs, scripts/deps/ui.txt)" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  # Debian's nodejs has no npm; NodeSource's bundles it (and conflicts with Debian's npm).
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "cel-npm: installing Debian package npm"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends npm
fi
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/node_modules/@bufbuild/cel/package.json" ]; then
  echo "cel-npm: tests/cel/node_modules up to date"
  exit 0
fi
echo "cel-npm: npm ci in tests/cel"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" > "$stamp"
