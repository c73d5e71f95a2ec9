#!/usr/bin/env bash
# Make sure bubblewrap (bwrap) is installed: the Lean processes that check code run in its
# sandbox (docs/sandbox.md), and the tests of that sandbox run it. Installs Debian's package when
# it is missing. Nothing is started here.
set -euo pipefail

found() {
  command -v bwrap >/dev/null 2>&1 && return 0
  [ -x /usr/bin/bwrap ] && return 0
  return 1
}

if found; then
  exit 0
fi
case "$(echo "${LEANLOOP_SANDBOX:-}" | tr '[:upper:]' '[:lower:]')" in
  off|0|false|no|n|f)
    echo "bubblewrap is not installed; LEANLOOP_SANDBOX=${LEANLOOP_SANDBOX}, so Lean runs without a sandbox." >&2
    exit 0
    ;;
esac
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bubblewrap is not installed and apt-get is not available." >&2
  echo "Install bubblewrap (/usr/bin/bwrap; e.g. 'dnf install bubblewrap'), or set LEANLOOP_SANDBOX=off to run Lean without a sandbox." >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
echo "Installing bubblewrap from Debian's packages (the sandbox of Lean processes)..."
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
found || { echo "the bubblewrap package did not provide /usr/bin/bwrap" >&2; exit 1; }
