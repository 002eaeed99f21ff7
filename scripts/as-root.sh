# Sourced by the install scripts (docker-engine.sh, chromium.sh), after they set SCRIPT to their name:
# `say` and `fail` prefix their lines with it, and `as_root` runs a command as root (directly, or
# through passwordless sudo) or fails saying it needs root.
say() { echo "$SCRIPT: $*"; }
fail() { echo "$SCRIPT: FAILED: $*" >&2; exit 1; }

SUDO=
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=sudo
  else NEED_ROOT=1; fi
fi
as_root() {
  [ -n "${NEED_ROOT:-}" ] && fail "'$*' needs root (run as root, or with passwordless sudo)"
  $SUDO "$@"
}
