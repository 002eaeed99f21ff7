#!/usr/bin/env bash
# Install a headless browser for the page checks (tests/chromium.py: the JupyterLab check in
# tests/test_lab_stack.py opens the URL `make up` prints in a real Chromium). CI runs it before
# `make test` (.ci/run), so that check runs there instead of skipping.
# Idempotent: it checks first and says what it did or why it skipped. Never run by `make up`.
#
#   bash scripts/chromium.sh
#
# What it installs: Debian's `chromium` package (apt-get update once, then apt-get install
# --no-install-recommends chromium), nothing downloaded from elsewhere. The browser runs headless
# and as root with --no-sandbox (tests/chromium.py), so no display and no sandbox setup is needed.
# Exit status: 0 when a Chromium that starts is on PATH; 1 otherwise, with the reason.
set -uo pipefail

SCRIPT=chromium
. "$(dirname "${BASH_SOURCE[0]}")/as-root.sh"

# The names tests/chromium.py looks for, in its order.
found() { command -v chromium || command -v chromium-browser || command -v google-chrome; }

version_of() { timeout 60 "$1" --headless --no-sandbox --version 2>/dev/null | head -n 1; }

if browser=$(found); then
  version=$(version_of "$browser") || fail "$browser is installed but does not start ('$browser --version' failed)"
  say "already installed: $browser ($version)"
  exit 0
fi

[ "$(uname -s)" = Linux ] || fail "this script is for Debian/Ubuntu Linux; elsewhere install Chromium or Chrome yourself"
command -v apt-get >/dev/null 2>&1 || fail "no apt-get: install Chromium with your system's package manager"

say "installing Debian's chromium package"
as_root apt-get update -qq || fail "apt-get update failed"
apt-cache show chromium >/dev/null 2>&1 \
  || fail "this system's apt sources have no 'chromium' package (on Ubuntu it is a snap: install Chrome or Chromium yourself)"
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
  || fail "apt-get install chromium failed"

browser=$(found) || fail "the chromium package installed, but no chromium command is on PATH"
version=$(version_of "$browser") || fail "$browser was installed but does not start ('$browser --version' failed)"
say "installed $browser ($version)"
