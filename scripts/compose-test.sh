#!/usr/bin/env bash
# `make compose-test`: build the images, start the whole Compose stack, prove it works, tear it
# down, and print how long each step took.
#
#   1. build      the images (docker compose build): the lab image, and with the override the Kafka one
#   2. up         every service, waiting for every health check (up --wait), then each one's state
#   3. kafka      Apache Kafka started (its "Kafka Server started" line) and answers on the EXTERNAL
#                 listener, 127.0.0.1:9092 from this machine, as the stack's cluster
#   4. token      JupyterLab refuses a request without its token and accepts one with it; so does
#                 the Spark Connect server, asked from the JupyterLab container as its jobs ask it
#   5. ports      every published port is bound to 127.0.0.1
#   6. PATTERN    for tweet-views and car-pollution: the pattern's generator service sends seeded,
#                 disordered events to Kafka; the job runs in the JupyterLab container as a client
#                 of the spark-connect service, whose driver runs it on the Spark master's workers,
#                 until it has caught up (that container runs no JVM); verify compares its output
#                 topic with the batch reference
#   7. down       stop and remove everything, volumes too, and check that nothing is left
#
# Where apache/kafka:4.1.1 is neither here nor pullable (no registry answers), the stack runs with
# docker-compose.no-registry.yml (Kafka from an image built here, from the same Maven jars as the
# native lab); without the official python base image, on the one scripts/docker-engine.sh builds.
# The builds fetch jars with Maven from Maven Central (or MAVEN_REPO) and trust LAB_EXTRA_CA_BUNDLE,
# by default this machine's CA bundle (so they work behind the same TLS interception as the host;
# LAB_EXTRA_CA_BUNDLE=none for no extra CA). Ports 9092, 8080, 7077, 8888, 8090, 15002 and 4040
# must be free.
#
# Exit status: 0 = all verified; 3 = no Docker engine, Compose v2 or base image here (nothing started);
# anything else = a step failed (its output is printed, and the stack is torn down all the same).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PATTERNS=(${COMPOSE_TEST_PATTERNS:-tweet-views car-pollution})
COUNT=${COMPOSE_TEST_COUNT:-2000}
OFFICIAL_BASE_IMAGE=python:3.11.15-slim-bookworm
LOCAL_BASE_IMAGE=${LOCAL_BASE_IMAGE:-stream-join-lab-base:bookworm-python3.11}
KAFKA_IMAGE=apache/kafka:4.1.1  # docker-compose.yml's; tests/test_compose.py checks that they agree
LOCAL_KAFKA_IMAGE=stream-join-lab-kafka:4.1.1  # docker-compose.no-registry.yml's

say() { echo "compose-test: $*"; }
STARTED=$(date +%s.%N)
TIMES=()
step_start() { STEP=$1; STEP_T0=$(date +%s.%N); say "--- $STEP"; }
step_end() {
  local took
  took=$(awk -v a="$STEP_T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  TIMES+=("$(printf '%-34s %7s s' "$STEP" "$took")")
  say "--- $STEP: ok in ${took} s"
}
print_times() {
  echo
  echo "compose-test: step times"
  printf '  %s\n' "${TIMES[@]}"
  printf '  %-34s %7s s\n' "total" "$(awk -v a="$STARTED" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')"
}

if ! command -v docker >/dev/null 2>&1; then say "no 'docker' command: run scripts/docker-engine.sh"; exit 3; fi
if ! docker info >/dev/null 2>&1; then
  say "no Docker engine answers ('docker info': $(docker info 2>&1 >/dev/null | grep -m1 .)); run scripts/docker-engine.sh"
  exit 3
fi
if ! docker compose version >/dev/null 2>&1; then say "no Compose v2 ('docker compose'); run scripts/docker-engine.sh"; exit 3; fi

# --- What this machine has ----------------------------------------------------------------------
FILES=(-f docker-compose.yml)
if docker image inspect "$KAFKA_IMAGE" >/dev/null 2>&1 || timeout 60 docker pull -q "$KAFKA_IMAGE" >/dev/null 2>&1; then
  say "Kafka: the official $KAFKA_IMAGE"
else
  FILES+=(-f docker-compose.no-registry.yml)
  say "Kafka: $KAFKA_IMAGE is not here and does not pull: $LOCAL_KAFKA_IMAGE, built here from Maven's jars (docker-compose.no-registry.yml)"
fi
if docker image inspect "$OFFICIAL_BASE_IMAGE" >/dev/null 2>&1; then
  export PYTHON_IMAGE=$OFFICIAL_BASE_IMAGE
elif docker image inspect "$LOCAL_BASE_IMAGE" >/dev/null 2>&1; then
  export PYTHON_IMAGE=$LOCAL_BASE_IMAGE
else
  say "no base image: neither $OFFICIAL_BASE_IMAGE nor $LOCAL_BASE_IMAGE is here; run scripts/docker-engine.sh"
  exit 3
fi
say "base image: $PYTHON_IMAGE"
bundle=${LAB_EXTRA_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [ "$bundle" != none ] && [ -s "$bundle" ]; then
  export LAB_EXTRA_CA_BUNDLE=$bundle
  say "the build also trusts $bundle (build secret extra_ca)"
else
  unset LAB_EXTRA_CA_BUNDLE
fi

# A project of its own (never the user's `make up` stack), with fresh tokens.
PROJECT=joinlab-compose-test
WORK=$(mktemp -d)
TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
CONNECT_TOKEN=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
printf 'JUPYTER_TOKEN=%s\nSPARK_CONNECT_AUTHENTICATE_TOKEN=%s\n' "$TOKEN" "$CONNECT_TOKEN" > "$WORK/test.env"
chmod 600 "$WORK/test.env"
unset COMPOSE_PROFILES JUPYTER_TOKEN SPARK_CONNECT_AUTHENTICATE_TOKEN LAB_SPARK_CONNECT_PORT LAB_SPARK_UI_PORT
DC=(docker compose --project-name "$PROJECT" --project-directory . "${FILES[@]}" --env-file "$WORK/test.env")

teardown() {
  status=$?
  trap - EXIT
  step_start "down (volumes too)"
  "${DC[@]}" --profile generators down --volumes --remove-orphans --timeout 20 >"$WORK/down.log" 2>&1 \
    || { cat "$WORK/down.log"; [ "$status" = 0 ] && status=1; }
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  volumes=$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")
  networks=$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")
  if [ -n "$left$volumes$networks" ]; then
    say "FAILED: left behind: containers [$left] volumes [$volumes] networks [$networks]"
    [ "$status" = 0 ] && status=1
  else
    step_end
  fi
  rm -rf "$WORK"
  print_times
  if [ "$status" = 0 ]; then say "PASSED: every service healthy, ${PATTERNS[*]} verified through the stack, nothing left running"
  else say "FAILED (exit $status)"; fi
  exit "$status"
}
trap teardown EXIT

fail() {
  say "FAILED at '$STEP': $*"
  "${DC[@]}" ps -a 2>&1 | sed 's/^/  /'
  "${DC[@]}" logs --no-color --tail 40 2>&1 | sed 's/^/  /' | tail -n 200
  exit 1
}

# run LOGNAME COMMAND...: its output goes to a log, shown when it fails.
run() {
  local log="$WORK/$1.log"; shift
  if ! "$@" >"$log" 2>&1; then tail -n 60 "$log" | sed 's/^/  | /'; return 1; fi
}

# --- 1. build -----------------------------------------------------------------------------------
step_start "build"
run build env BUILDKIT_PROGRESS=plain "${DC[@]}" build || fail "docker compose build failed"
# What the build said about the jars (Maven's fetches, or CACHED where nothing changed) and the CA.
grep -hoE "fetch_jars: [^(]*|added [^ ]*spark-sql-kafka[^ ]*|Spark's Kafka connector loads|with-extra-ca: .*" \
  "$WORK/build.log" | sort -u | sed 's/^/  /'
for image in stream-join-lab:latest $LOCAL_KAFKA_IMAGE; do
  docker image ls --format '  {{.Repository}}:{{.Tag}} {{.ID}} {{.Size}}' "$image"
done
step_end

bash scripts/notebooks-writable.sh

# --- 2. up --------------------------------------------------------------------------------------
step_start "up --wait (health checks)"
run up "${DC[@]}" up -d --wait || fail "docker compose up --wait failed"
"${DC[@]}" ps -a --format '{{.Service}}\t{{.State}}\t{{.Status}}' | sort | sed 's/^/  /'
unhealthy=$("${DC[@]}" ps --format '{{.Service}} {{.Status}}' | grep -v '(healthy)' || true)
[ -z "$unhealthy" ] || fail "not healthy: $unhealthy"
step_end

# --- 3. kafka -----------------------------------------------------------------------------------
step_start "Kafka: started, at 127.0.0.1:9092"
"${DC[@]}" logs --no-color --no-log-prefix kafka >"$WORK/kafka.log" 2>&1 || fail "docker compose logs kafka failed"
grep -m1 "Kafka Server started" "$WORK/kafka.log" | sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/^/  /'
grep -q "Kafka Server started" "$WORK/kafka.log" || fail "the kafka service's log has no 'Kafka Server started' line"
cluster=$("${DC[@]}" config --format json | python3 -c 'import json, sys; print(json.load(sys.stdin)["services"]["kafka"]["environment"]["CLUSTER_ID"])') \
  || fail "no CLUSTER_ID in the kafka service's environment"
python3 docker/kafka/healthcheck.py 127.0.0.1:9092 --cluster-id "$cluster" | sed 's/^/  EXTERNAL listener /' \
  || fail "Kafka's EXTERNAL listener 127.0.0.1:9092 does not answer as cluster $cluster"
step_end

# --- 4. token -----------------------------------------------------------------------------------
step_start "JupyterLab token"
jupyter_port=$("${DC[@]}" port jupyter 8888) || fail "jupyter publishes no port 8888"
python3 - "$jupyter_port" "$TOKEN" <<'CHECK' || fail "the JupyterLab token check failed"
import sys
import urllib.error
import urllib.request
address, token = sys.argv[1], sys.argv[2]
try:
    urllib.request.urlopen(f"http://{address}/api/status", timeout=10)
    sys.exit("JupyterLab answered /api/status without the token")
except urllib.error.HTTPError as exc:
    if exc.code not in (401, 403):
        sys.exit(f"without the token: HTTP {exc.code}, expected 401 or 403")
for wrong in ("", "0" * 32):
    try:
        urllib.request.urlopen(f"http://{address}/api/status?token={wrong}", timeout=10)
        sys.exit(f"JupyterLab accepted the wrong token {wrong!r}")
    except urllib.error.HTTPError:
        pass
with urllib.request.urlopen(f"http://{address}/api/status?token={token}", timeout=10) as ok:
    assert ok.status == 200, ok.status
print(f"  http://{address}: refused without the token (and with a wrong one), 200 with it")
# With the token, JupyterLab can save into ./notebooks (the bind mount its non-root user writes to).
url = f"http://{address}/api/contents/compose-test-write-check.ipynb?token={token}"
body = b'{"type": "notebook", "content": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}}'
request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=10) as saved:
    assert saved.status in (200, 201), saved.status
urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=10).close()
print("  JupyterLab saved (and deleted) a notebook in ./notebooks")
CHECK
# JupyterLab deletes to a trash folder in ./notebooks: take the check's notebook out of it again.
find notebooks -path 'notebooks/.Trash-*' -name 'compose-test-write-check.ipynb*' -delete
find notebooks -depth -path 'notebooks/.Trash-*' -type d -empty -delete
step_end

step_start "Spark Connect token"
# From the JupyterLab container, as its jobs connect (joinlab.spark.connect over the stack's network).
"${DC[@]}" exec -T jupyter python3 - <<'CHECK' || fail "the Spark Connect token check failed"
import os
from joinlab.spark import ServerError, connect
url, token = os.environ["SPARK_REMOTE"], os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"]
for wrong in ("", "0" * 32):
    try:
        connect(url, wrong).stop()
        raise SystemExit(f"the Spark Connect server accepted the token {wrong!r}")
    except ServerError:
        pass
spark = connect(url, token)
assert spark.range(3).count() == 3
spark.stop()
print(f"  {url}: refused without the token (and with a wrong one), runs a query with it")
CHECK
step_end

# --- 5. ports -----------------------------------------------------------------------------------
step_start "ports on 127.0.0.1"
ports=$("${DC[@]}" ps --format '{{.Service}} {{.Ports}}')
printf '%s\n' "$ports" | sed 's/^/  /'
bound=$(printf '%s\n' "$ports" | grep -oE '[^ ,]+->[0-9]+/(tcp|udp)' || true)
[ -n "$bound" ] || fail "no published port found"
beyond=$(printf '%s\n' "$bound" | grep -v '^127\.0\.0\.1:' || true)
[ -z "$beyond" ] || fail "published beyond this machine: $beyond"
step_end

# --- 6. the patterns, through the stack ---------------------------------------------------------
for pattern in "${PATTERNS[@]}"; do
  step_start "$pattern: generate"
  run "gen-$pattern" "${DC[@]}" run --rm --no-deps -T "gen-$pattern" \
    joinlab generate "$pattern" --count "$COUNT" --seed 7 --delayed 0.3 --max-delay 5 --duplicates 0.05 \
    --malformed 0.01 --no-progress || fail "the gen-$pattern service failed"
  tail -n 2 "$WORK/gen-$pattern.log" | sed 's/^/  /'
  step_end
  step_start "$pattern: job on the cluster"
  run "job-$pattern" "${DC[@]}" exec -T jupyter joinlab run "$pattern" --available-now --reset \
    || fail "the $pattern job failed"
  # The job ran on the cluster through the Connect server: the master lists the server's one
  # application with executors' cores and none of the job's own, the server's UI lists the query's
  # micro-batches, and the JupyterLab container runs no JVM.
  "${DC[@]}" exec -T jupyter python3 - "${pattern//-/_}" <<'ON_CLUSTER' || fail "the $pattern job did not run on the Connect server"
import json
import sys
import urllib.request
def get(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)
master = get("http://spark-master:8080/json/")
apps = [(a["name"], a["cores"]) for a in master["activeapps"] + master["completedapps"]]
assert [name for name, _ in apps] == ["stream-join-lab"] and apps[0][1] > 0, apps
ui = "http://spark-connect:4040/api/v1/applications"
app = get(ui)[0]["id"]
batches = [e for e in get(f"{ui}/{app}/sql?details=false&length=1000") if sys.argv[1] in e.get("description", "")]
assert batches, f"no SQL execution of the query {sys.argv[1]} in the server's UI"
print(f"  {sys.argv[1]} ran on the Connect server's application on {master['url']}: {apps[0][1]} cores on "
      f"{master['aliveworkers']} worker(s), {len(batches)} micro-batch executions in its UI")
ON_CLUSTER
  # pgrep's status 1 is "none": 0 (one runs) or anything else (no pgrep) fails.
  jvms=$("${DC[@]}" exec -T jupyter sh -c 'pgrep -a java; test $? = 1') || fail "a JVM runs in the JupyterLab container: $jvms"
  echo "  no JVM in the JupyterLab container"
  step_end
  step_start "$pattern: verify"
  run "verify-$pattern" "${DC[@]}" exec -T jupyter joinlab verify "$pattern" || fail "$pattern does not match its reference"
  sed 's/^/  /' "$WORK/verify-$pattern.log"
  grep -q 'mismatches (OK)' "$WORK/verify-$pattern.log" || fail "verify printed no OK"
  step_end
done
