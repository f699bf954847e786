#!/usr/bin/env bash
# Install what the browser tests (tests/report/test_reports_browser.py) need: Debian's chromium and the
# playwright package, which drives it through executable_path (Playwright's own browser
# download is never used, so this works where only Debian and PyPI mirrors are reachable).
#
#   scripts/browser-setup.sh .venv/bin/python
#
# Idempotent: with both present it changes nothing (it never upgrades an installed chromium)
# and returns in about a second. Installing chromium needs root (or sudo) and apt.
set -euo pipefail

PY=${1:?usage: $0 PYTHON  (the python of the virtual environment to install playwright into)}
CHROMIUM=${BIASSCOPE_CHROMIUM:-/usr/bin/chromium}

if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $CHROMIUM"
else
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=()
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        echo "error: $CHROMIUM missing and installing it needs root: apt-get install -y chromium" >&2
        exit 1
    fi
    echo "installing Debian chromium with apt-get (a few hundred MB; about a minute)"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" apt-get install -y -q chromium
    echo "installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
fi

if "$PY" -c "import playwright.sync_api" >/dev/null 2>&1; then
    echo "playwright already installed for $PY"
else
    echo "installing playwright into $PY"
    "$(dirname "$0")/pinned-pip.sh" "$PY" -q playwright
fi
