#!/usr/bin/env bash
# Make sure a Chromium browser is installed for the playground page's browser test, installing
# Debian's package when it is not. Nothing is started here; the test launches its own headless
# browser.
set -euo pipefail

found() {
  command -v chromium >/dev/null 2>&1 && return 0
  [ -x /usr/bin/chromium ] && return 0
  return 1
}

if found; then
  exit 0
fi
if [ "${LEANLOOP_SKIP_BROWSER:-}" = "1" ]; then
  echo "Chromium is not installed; LEANLOOP_SKIP_BROWSER=1, so the browser test will be skipped." >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "Chromium is not installed and apt-get is not available." >&2
  echo "Install Chromium (/usr/bin/chromium), or set LEANLOOP_SKIP_BROWSER=1 to skip the browser test." >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
echo "Installing Chromium from Debian's packages (needed by the playground page's browser test)..."
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
found || { echo "the chromium package did not provide /usr/bin/chromium" >&2; exit 1; }
