#!/usr/bin/env bash
# Start the lab's Docker Compose stack (what `make up` runs) and print where everything is.
#
#   scripts/compose-up.sh                           # Kafka, Spark master + 1 worker + Connect, JupyterLab
#   scripts/compose-up.sh --scale spark-worker=3    # extra arguments go to `docker compose up`
#   COMPOSE_PROFILES=generators,ui scripts/compose-up.sh
#
# Exit code 3 (and one line on stderr) means "no usable Docker here": the caller (the Makefile)
# falls back to the native stack. Any other failure exits with docker compose's own status.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v docker >/dev/null 2>&1; then
  echo "compose-up: no 'docker' command on PATH, so no Docker stack (install Docker to use it)." >&2
  exit 3
fi
if ! info_error=$(docker info 2>&1 >/dev/null); then
  reason=$(printf '%s\n' "$info_error" | grep -m1 -v '^[[:space:]]*$' || true)
  echo "compose-up: no Docker engine reachable ('docker info' failed: ${reason:-no output}), so no Docker stack." >&2
  exit 3
fi
if ! docker compose version >/dev/null 2>&1; then
  echo "compose-up: Docker Compose v2 ('docker compose') is not installed, so no Docker stack." >&2
  exit 3
fi
# The images the stack starts from must be here or pull: where no registry answers (and they were
# never pulled), the native stack is the lab; `make compose-test` shows the stack running there with
# docker-compose.no-registry.yml and a local base image (docs/docker.md). apache/kafka's version is
# docker-compose.yml's (tests/test_compose.py checks that they agree).
for image in apache/kafka:4.1.1 "${PYTHON_IMAGE:-python:3.11.15-slim-bookworm}"; do
  if ! docker image inspect "$image" >/dev/null 2>&1 && ! timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    echo "compose-up: the image $image is not here and does not pull (no registry reachable?), so no Docker stack." >&2
    exit 3
  fi
done

new_token() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import secrets;print(secrets.token_hex(16))'
  else
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n'
  fi
}

# .env: from .env.example when missing; a random token for JupyterLab and one for the Spark Connect
# server where it has none. The tokens are secrets, so the file is readable by its owner only.
if [ ! -f .env ]; then
  cp .env.example .env
  echo "compose-up: created .env from .env.example"
fi
chmod 600 .env
env_value() { sed -n "s/^$1=//p" .env | tail -n 1 | tr -d "\"' \r"; }
fill_token() {  # NAME WHAT: a new token in .env unless NAME has one
  local value
  [ -n "$(env_value "$1")" ] && return 0
  value=$(new_token)
  if grep -q "^$1=" .env; then
    sed -i.bak "s/^$1=.*/$1=${value}/" .env && rm -f .env.bak
  else
    printf '\n%s=%s\n' "$1" "$value" >> .env
  fi
  echo "compose-up: generated a $2 token in .env"
}
fill_token JUPYTER_TOKEN JupyterLab
fill_token SPARK_CONNECT_AUTHENTICATE_TOKEN "Spark Connect"
token=$(env_value JUPYTER_TOKEN)
# The image's user gets your UID, so the mounted ./notebooks stays writable on both sides.
if ! grep -q '^LAB_UID=' .env && [ "$(id -u)" != 0 ]; then
  printf 'LAB_UID=%s\n' "$(id -u)" >> .env
fi
# Created here, not by Docker (which would make it root-owned); as root, handed to the image's user.
bash scripts/notebooks-writable.sh

docker compose up -d --build --wait "$@" || {
  status=$?
  echo "compose-up: 'docker compose up' failed (exit $status); see 'docker compose ps' and 'docker compose logs'." >&2
  exit "$status"
}

profiles=",${COMPOSE_PROFILES:-},"
echo
echo "Stream Join Lab is up:"
echo "  JupyterLab        http://localhost:8888/lab?token=${token}"
echo "  Spark master UI   http://localhost:8080   (master URL spark://spark-master:7077 inside the stack)"
echo "  Spark Connect     sc://localhost:$(env_value LAB_SPARK_CONNECT_PORT | grep . || echo 15002)   token in .env" \
  "(SPARK_CONNECT_AUTHENTICATE_TOKEN); web UI of every job http://localhost:$(env_value LAB_SPARK_UI_PORT | grep . || echo 4040)"
echo "  Kafka bootstrap   127.0.0.1:9092 from this machine, kafka:19092 inside the stack"
if [[ $profiles == *,ui,* ]]; then
  echo "  Kafka UI          http://localhost:8081"
fi
echo "Stop it with 'docker compose down' (add -v to also delete Kafka's data and the lab state)."
