#!/usr/bin/env bash
# npm packages of the UI's browser tests (tests/browser/package.json, pinned exactly in
# package-lock.json): runs `npm ci` there when node_modules is missing or older than the lock
# file. Idempotent; a no-op (no network) when up to date. Never downloads a browser: the tests
# use Debian's /usr/bin/chromium (playwright-core has no browser of its own).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dir="$here/tests/browser"
stamp="$dir/node_modules/.fracgpu-lock.sha256"
if ! command -v node >/dev/null; then
  echo "ui-npm: node not found (Debian package nodejs, scripts/deps/ui.txt)" >&2
  exit 1
fi
if ! command -v npm >/dev/null; then
  # Debian's nodejs has no npm; NodeSource's bundles it (and conflicts with Debian's npm).
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "ui-npm: installing Debian package npm"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends npm
fi
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/node_modules/playwright-core/package.json" ]; then
  echo "ui-npm: tests/browser/node_modules up to date"
  exit 0
fi
echo "ui-npm: npm ci in tests/browser"
(cd "$dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
echo "$want" > "$stamp"
