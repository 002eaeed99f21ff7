#!/usr/bin/env bash
# Install and start a Docker engine with the Compose v2 plugin on a Debian/Ubuntu Linux machine
# without Docker Desktop (the build machines, CI), and make the lab image's base image available.
# Idempotent: every step checks first and says what it did or why it skipped. Never run by `make up`.
#
#   bash scripts/docker-engine.sh          # install + start what is missing
#   bash scripts/docker-engine.sh --stop   # stop the dockerd this script started (it stays installed)
#
# Steps:
#   1. Engine: Debian's docker.io package; dockerd started by systemd when it runs, else in the
#      background (log: /var/log/joinlab-dockerd.log).
#   2. Compose v2: the `docker compose` plugin. Where apt has no plugin package (Debian bookworm),
#      the static binary from Debian trixie's docker-compose package is downloaded with a private
#      apt configuration (the system's own sources are not touched, nothing is upgraded) and copied
#      to /usr/local/lib/docker/cli-plugins/.
#   3. Base image: the Dockerfile's default (python:3.11.15-slim-bookworm) when it is here or pulls;
#      where no registry answers, a local one: `debootstrap --variant=minbase bookworm`,
#      `docker import`, then Debian's Python 3.11 on top (docker/base.Dockerfile), tagged
#      $LOCAL_BASE_IMAGE. scripts/compose-test.sh builds on whichever is here.
# Exit status: 0 when an engine answers with Compose v2 and a base image; 1 otherwise, with the reason.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OFFICIAL_BASE_IMAGE=python:3.11.15-slim-bookworm
LOCAL_BASE_IMAGE=${LOCAL_BASE_IMAGE:-stream-join-lab-base:bookworm-python3.11}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKERD_LOG=/var/log/joinlab-dockerd.log
DOCKERD_PID=/var/run/joinlab-dockerd.pid
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
PULL_TIMEOUT_S=${PULL_TIMEOUT_S:-60}

SCRIPT=docker-engine
. scripts/as-root.sh

engine_answers() { docker info >/dev/null 2>&1; }

stop_engine() {
  if [ -f "$DOCKERD_PID" ] && kill -0 "$(cat "$DOCKERD_PID")" 2>/dev/null; then
    pid=$(cat "$DOCKERD_PID")
    as_root kill -TERM "$pid"
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then fail "dockerd (pid $pid) did not stop within 30 s"; fi
    as_root rm -f "$DOCKERD_PID"
    say "stopped dockerd (pid $pid)"
  else
    say "no dockerd started by this script is running"
  fi
}

if [ "${1:-}" = "--stop" ]; then stop_engine; exit 0; fi
[ "$(uname -s)" = Linux ] || fail "this script is for Linux machines; elsewhere install Docker Desktop"

# --- 1. The engine ------------------------------------------------------------------------------
apt_updated=
apt_install() {
  command -v apt-get >/dev/null 2>&1 || fail "no apt-get: install $* with your system's package manager"
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq || fail "apt-get update failed"; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
    || fail "apt-get install $* failed"
}

if engine_answers; then
  say "engine: already answers ($(docker version --format 'server {{.Server.Version}}' 2>/dev/null))"
else
  if ! command -v dockerd >/dev/null 2>&1; then
    say "engine: installing Debian's docker.io (dockerd, containerd, runc)"
    apt_install docker.io
  fi
  if [ -d /run/systemd/system ]; then
    say "engine: starting docker.service with systemd"
    as_root systemctl start docker || fail "systemctl start docker failed (see journalctl -u docker)"
  else
    say "engine: no systemd here; starting dockerd in the background (log $DOCKERD_LOG)"
    # setsid: dockerd outlives this script and the caller's process group.
    as_root sh -c "setsid dockerd --pidfile '$DOCKERD_PID' >>'$DOCKERD_LOG' 2>&1 < /dev/null &"
  fi
  for _ in $(seq 1 120); do engine_answers && break; sleep 0.5; done
  if ! engine_answers; then
    tail -n 20 "$DOCKERD_LOG" 2>/dev/null | sed 's/^/  dockerd: /' >&2
    fail "the engine did not answer within 60 s ('docker info': $(docker info 2>&1 >/dev/null | grep -m1 .))"
  fi
  say "engine: answers ($(docker version --format 'server {{.Server.Version}}, storage '"$(docker info --format '{{.Driver}}')" 2>/dev/null))"
fi

# --- 2. Compose v2 ------------------------------------------------------------------------------
if docker compose version >/dev/null 2>&1; then
  say "compose: already installed ($(docker compose version --short))"
else
  if apt-cache show docker-compose-plugin >/dev/null 2>&1; then
    say "compose: installing the docker-compose-plugin package"
    apt_install docker-compose-plugin
  else
    say "compose: no plugin package in this system's sources; taking the static binary from Debian trixie's docker-compose"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR trixie main" > "$work/sources.list"
    private_apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/parts"
                 -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")
    apt-get "${private_apt[@]}" update -qq >/dev/null || fail "apt-get update for trixie (private lists in $work) failed"
    (cd "$work" && apt-get "${private_apt[@]}" download docker-compose >/dev/null) \
      || fail "apt-get download docker-compose from trixie failed"
    dpkg-deb -x "$work"/docker-compose_*.deb "$work/root" || fail "could not unpack the docker-compose package"
    binary=$(find "$work/root" -path '*cli-plugins/docker-compose' -type f | head -n 1)
    [ -n "$binary" ] || fail "the trixie docker-compose package has no cli-plugins/docker-compose"
    as_root install -D -m 0755 "$binary" "$PLUGIN_DIR/docker-compose"
    say "compose: installed $(basename "$work"/docker-compose_*.deb) as $PLUGIN_DIR/docker-compose"
  fi
  docker compose version >/dev/null 2>&1 || fail "'docker compose version' still fails after the install"
  say "compose: $(docker compose version)"
fi

# --- 3. The base image --------------------------------------------------------------------------
if docker image inspect "$OFFICIAL_BASE_IMAGE" >/dev/null 2>&1; then
  say "base image: $OFFICIAL_BASE_IMAGE is here"
elif docker image inspect "$LOCAL_BASE_IMAGE" >/dev/null 2>&1; then
  say "base image: $LOCAL_BASE_IMAGE (built here earlier) is here"
elif pulled=$(timeout "$PULL_TIMEOUT_S" docker pull -q "$OFFICIAL_BASE_IMAGE" 2>&1); then
  say "base image: pulled $OFFICIAL_BASE_IMAGE"
else
  say "base image: cannot pull $OFFICIAL_BASE_IMAGE ($(printf '%s' "${pulled:-timed out after ${PULL_TIMEOUT_S}s}" | tail -n 1)); building $LOCAL_BASE_IMAGE from Debian packages"
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  rootfs=$(mktemp -d /var/tmp/joinlab-rootfs.XXXXXX)
  say "base image: debootstrap --variant=minbase bookworm from $DEBIAN_MIRROR"
  as_root debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" > "$rootfs.log" 2>&1 \
    || { tail -n 20 "$rootfs.log" >&2; fail "debootstrap failed (log $rootfs.log)"; }
  as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  as_root tar -C "$rootfs" -c . | docker import - "$LOCAL_BASE_IMAGE-minbase" >/dev/null \
    || fail "docker import of the debootstrap root failed"
  as_root rm -rf "$rootfs" "$rootfs.log"
  build_log=$(mktemp)
  docker build -t "$LOCAL_BASE_IMAGE" --build-arg "MINBASE=$LOCAL_BASE_IMAGE-minbase" \
    -f docker/base.Dockerfile docker >"$build_log" 2>&1 \
    || { tail -n 30 "$build_log" >&2; fail "building $LOCAL_BASE_IMAGE (docker/base.Dockerfile) failed"; }
  rm -f "$build_log"
  say "base image: built $LOCAL_BASE_IMAGE ($(docker run --rm "$LOCAL_BASE_IMAGE" python3 --version))"
fi
say "ready: engine, Compose v2 and a base image ('bash scripts/docker-engine.sh --stop' stops the engine)"
