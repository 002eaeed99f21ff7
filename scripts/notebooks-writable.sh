#!/usr/bin/env bash
# Make ./notebooks writable by the lab image's user (uid LAB_UID, from the environment or .env,
# default 1000), which JupyterLab runs as on the bind-mounted ./notebooks. Only needed when you
# run Docker as root (CI, build machines): your own files are then root's and the image's user
# could not save a notebook, so they are handed to that uid. As any other user, the image's user
# already has your uid (scripts/compose-up.sh writes LAB_UID=$(id -u) to .env) and nothing is done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p notebooks
[ "$(id -u)" = 0 ] || exit 0
uid=${LAB_UID:-$( (sed -n 's/^LAB_UID=//p' .env 2>/dev/null || true) | tail -n 1)}
uid=${uid:-1000}
if [ "$(stat -c %u notebooks)" != "$uid" ] || find notebooks ! -uid "$uid" -print -quit | grep -q .; then
  chown -R "$uid:$uid" notebooks
  echo "notebooks-writable: ./notebooks handed to uid $uid (the image's user), so JupyterLab can save there"
fi
