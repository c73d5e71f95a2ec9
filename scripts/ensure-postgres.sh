#!/usr/bin/env bash
# Make sure PostgreSQL's server programs (initdb, pg_ctl) are installed, installing Debian's
# package when they are not. The tests start their own throwaway cluster; nothing is started here.
set -euo pipefail

found() {
  command -v initdb >/dev/null 2>&1 && return 0
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
  return 1
}

if found; then
  exit 0
fi
if [ "${LEANLOOP_SKIP_POSTGRES:-}" = "1" ]; then
  echo "PostgreSQL is not installed; LEANLOOP_SKIP_POSTGRES=1, so its tests will be skipped." >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL (initdb) is not installed and apt-get is not available." >&2
  echo "Install PostgreSQL's server package, or set LEANLOOP_SKIP_POSTGRES=1 to skip its tests." >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
echo "Installing PostgreSQL from Debian's packages (needed by the database tests)..."
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
found || { echo "PostgreSQL installation did not provide initdb" >&2; exit 1; }
