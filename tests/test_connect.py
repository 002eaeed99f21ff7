"""The lab's Spark as one Spark Connect server with clients (joinlab.spark): what a client sees when
the server is not there or refuses it, when the server is killed under a running job, and what
becomes of a killed client's query on the server. On Apache Kafka and real Spark."""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from joinlab import patterns
from joinlab.generate import send
from joinlab.spark import SESSION_TIMEOUT, TOKEN_VARIABLE
from joinlab.topics import create_topics
from joinlab.verify import verify
from tests.conftest import ROOT, committed_batches, kill_group, run_pattern_process, wait_for
from tests.server_side import own_server_env

pytestmark = pytest.mark.spark
PATTERN = "tweet-views"


def joinlab_run(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joinlab", "run", PATTERN, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **env})


def test_no_server_at_the_address_or_a_wrong_token_is_one_line_that_says_what_to_check(spark, bootstrap, tmp_path):
    create_topics(bootstrap, patterns.all_topics(PATTERN))
    base = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(tmp_path)}
    nobody = joinlab_run({**base, "SPARK_REMOTE": "sc://localhost:1"}, "--available-now")
    assert nobody.returncode == 2, nobody.stderr
    assert "no Spark Connect server at sc://localhost:1: nothing answers there" in nobody.stderr
    assert "is the lab up (`make ps`), is the port right?" in nobody.stderr
    assert "Traceback" not in nobody.stderr and len(nobody.stderr.strip().splitlines()) == 1, nobody.stderr
    wrong = joinlab_run({**base, TOKEN_VARIABLE: "not-the-token"}, "--available-now")  # the session's server
    assert wrong.returncode == 2, wrong.stderr
    assert "the server refused the token: check $SPARK_CONNECT_AUTHENTICATE_TOKEN" in wrong.stderr
    assert "Traceback" not in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr


def start_server(tmp_path: Path, name: str) -> tuple[subprocess.Popen, dict]:
    """A server in a process (and process group) of its own, and the environment of its clients."""
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "programs" / "connect_server.py")], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / f"{name}.log", "wb"),
                              text=True, start_new_session=True,
                              env=own_server_env() | {"SPARK_MASTER": "local[2]"})
    url, token = server.stdout.readline().split()
    return server, {"SPARK_REMOTE": url, TOKEN_VARIABLE: token}


def test_the_server_killed_under_a_running_job_stops_its_client_with_what_to_run_and_the_job_resumes(
        spark, bootstrap, tmp_path):
    """The client says what happened and what to run, in a line, not a gRPC stack; a new server
    resumes the job from its checkpoint, and its output equals the reference."""
    create_topics(bootstrap, patterns.all_topics(PATTERN))
    send(bootstrap, patterns.generator(PATTERN).generate(5, 600), progress=False)
    checkpoint = tmp_path / "checkpoint"
    server, clients = start_server(tmp_path, "server-1")
    try:
        with open(tmp_path / "client.log", "wb") as log:
            client = run_pattern_process(PATTERN, bootstrap, checkpoint, tmp_path, log, clients,
                                         "--max-offsets-per-trigger", "100", own_server=False)
            wait_for(lambda: committed_batches(checkpoint) or client.poll() is not None, 180, "a first micro-batch")
            kill_group(server)
            client.wait(timeout=60)
    finally:
        kill_group(server)
    said = (tmp_path / "client.log").read_text()
    assert client.returncode == 1, said
    assert "ServerGone: the lab's Spark Connect server stopped answering" in said and "Traceback" not in said, said
    done_before = max(committed_batches(checkpoint))
    server, clients = start_server(tmp_path, "server-2")
    try:
        resumed = joinlab_run({"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(tmp_path), **clients},
                              "--checkpoint", str(checkpoint), "--available-now", "--json", timeout=300)
    finally:
        kill_group(server)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f'"batch":{done_before + 1},' in resumed.stdout.splitlines()[0], "it resumes after the last committed batch"
    report = verify(PATTERN, bootstrap)
    assert report.ok, "\n".join(report.lines())


def test_a_killed_clients_query_stops_with_its_session_and_a_new_start_on_its_checkpoint_takes_over(
        spark, bootstrap, tmp_path):
    """A client killed (SIGKILL: nothing of it runs to stop its query) leaves its query on the server
    only until the server ends its session (SESSION_TIMEOUT without a word from it); meanwhile a new
    `joinlab run` on the same checkpoint stops that run and takes over (never two runs on one
    checkpoint)."""
    create_topics(bootstrap, patterns.all_topics(PATTERN))
    records = patterns.generator(PATTERN).generate(6, 3000)
    checkpoint = tmp_path / "checkpoint"

    def killed_client(name: str, its_records: list) -> None:
        """A client that reads `its_records` in micro-batches of 200, killed after its second batch."""
        send(bootstrap, its_records, progress=False)
        with open(tmp_path / f"{name}.log", "wb") as log:
            client = run_pattern_process(PATTERN, bootstrap, checkpoint, tmp_path, log, None,
                                         "--max-offsets-per-trigger", "200", own_server=False)
            before = committed_batches(checkpoint)
            wait_for(lambda: len(committed_batches(checkpoint) - before) >= 2 or client.poll() is not None, 180,
                     "two micro-batches of the client")
            kill_group(client)
        assert client.returncode == -signal.SIGKILL, (tmp_path / f"{name}.log").read_text()[-3000:]

    killed_client("first", records[:600])
    killed_client("second", records[600:1200])  # on the first's checkpoint, the first's query still running
    # The second's query goes on reading what comes until the server ends its session: records sent
    # now and then are read, until some are left unread.
    later = itertools.cycle([records[i:i + 50] for i in range(1200, len(records), 50)])

    def reads_no_more() -> bool:
        before = committed_batches(checkpoint)
        send(bootstrap, next(later), progress=False)
        try:
            wait_for(lambda: committed_batches(checkpoint) - before, 15, "the orphan to read them")
        except AssertionError:
            return True
        return False
    began = time.monotonic()
    assert not reads_no_more(), "the killed client's query should still read, before its session ends"
    wait_for(reads_no_more, float(SESSION_TIMEOUT.rstrip("s")) + 90, "the server to end the killed client's query")
    assert time.monotonic() - began > 20, "the query ended before its session could have timed out"
    resumed = joinlab_run({"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(tmp_path)},
                          "--checkpoint", str(checkpoint), "--available-now", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    report = verify(PATTERN, bootstrap)
    assert report.ok, "\n".join(report.lines())
