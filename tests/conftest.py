"""Shared fixtures: one real Apache Kafka broker and one real Spark session per test session,
a clean broker for every test, condition waits.

`bootstrap` hands every integration test the session's embedded Apache Kafka broker (one KRaft
node from the jars `make install` fetched) with no topic left from an earlier test: the topics are
deleted before each test, so a test that reuses a pattern's topic names starts from empty topics,
and the broker's JVM starts once per session, not once per test. Tests that stop, kill or restart
a broker start their own (test_chaos.py). The Kafka image that Compose builds runs through
testcontainers in test_kafka_container.py.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.server_side import own_server_env

ROOT = Path(__file__).resolve().parents[1]
# The jars `make install` fetched into the checkout's .lab/jars, whatever LAB_HOME the tests use.
os.environ.setdefault("LAB_JARS", str(ROOT / ".lab" / "jars"))
os.environ.setdefault("LAB_HOME", tempfile.mkdtemp(prefix="joinlab-tests-"))
# Two state partitions, not the lab's default four: still more than one (keyed state is really
# split), and every micro-batch of every stateful test is cheaper on a 2-core CI machine.
os.environ.setdefault("LAB_SHUFFLE_PARTITIONS", "2")
# No Spark web UI in tests (nobody looks at it; it costs start-up time); the lab turns it on.
os.environ.setdefault("LAB_SPARK_UI", "false")


def docker_problem() -> str | None:
    """None when a Docker engine answers, else why not."""
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker CLI unusable: {exc}"
    if done.returncode != 0:
        return "no Docker engine reachable (`docker info` failed: " + (done.stderr.strip().splitlines() or ["?"])[-1] + ")"
    return None


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """The session's embedded Apache Kafka broker."""
    from joinlab.broker import EmbeddedBroker
    with EmbeddedBroker(log_path=tmp_path_factory.mktemp("kafka") / "broker.log") as broker:
        yield broker


@pytest.fixture
def bootstrap(kafka):
    """The session's broker, with every topic of earlier tests deleted."""
    delete_all_topics(kafka.bootstrap_servers)
    return kafka.bootstrap_servers


def delete_all_topics(bootstrap: str, timeout_s: float = 60) -> None:
    """Delete every topic but Kafka's own and wait until the broker lists none of them; then close
    the Kafka producers that wrote them (close_cached_producers)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def listed() -> list[str]:
        return sorted(t for t in admin.list_topics() if not t.startswith("__"))
    try:
        if names := listed():
            admin.delete_topics(names)
        try:
            wait_for(lambda: not listed(), timeout_s, "the earlier tests' topics to be deleted")
        except AssertionError as failed:
            # a consumer still reading a topic makes the broker create it again: name who could be reading
            raise AssertionError(f"{failed}: still listed {listed()}; the processes this test session "
                                 f"started that still run: {children_of_this_process()}") from None
    finally:
        admin.close()
    close_cached_producers()


def close_cached_producers() -> None:
    """Close the Kafka producers that Spark's sink keeps on the session's server (one per set of
    options, reused by every later query). Each one remembers the partitions of the topics it wrote;
    a test that creates a deleted topic again with fewer partitions would have a record sent to a
    partition that is gone, held until its delivery timeout (120 s). A lab never deletes a topic
    its server wrote, so this is the tests' own concern: a server this process does not run
    (`$SPARK_REMOTE` set before the session) keeps its producers."""
    from joinlab import spark
    if spark._embedded_server is not None:
        pool = getattr(spark._embedded_server._jvm.org.apache.spark.sql.kafka010.producer, "InternalKafkaProducerPool$")
        pool.__getattr__("MODULE$").reset()  # closes every cached producer


@pytest.fixture(scope="session")
def spark():
    """A client of the test session's Spark Connect server, which runs in this process; every
    `joinlab` process a test starts after this is a client of the same server ($SPARK_REMOTE), as
    in a running lab, unless the test says otherwise."""
    from joinlab.spark import TOKEN_VARIABLE, server, session, stop
    spark = session("tests")
    url, token = server()
    os.environ.update(SPARK_REMOTE=url, **{TOKEN_VARIABLE: token})
    yield spark
    stop(spark)  # and the server with it, before the broker goes


def children_of_this_process() -> list[str]:
    """Every process the test session started and that still runs: pid and command line."""
    from joinlab.stack import procs
    from perf.memory import command_line
    return [f"{pid} {command_line(pid)[:200]}" for pid in sorted(procs.tree([os.getpid()]) - {os.getpid()})]


@pytest.fixture(autouse=True)
def no_query_left_running():
    """A test that leaves a streaming query running in this process's Spark fails, naming it, and the
    query is stopped: it would go on reading its topics while later tests delete them, and the broker
    creates a topic a consumer asks for again."""
    yield
    lab_spark = sys.modules.get("joinlab.spark")
    spark = lab_spark._client if lab_spark else None
    left = spark.streams.active if spark is not None and not spark.is_stopped else []
    names = [f"{q.name or 'unnamed'} ({q.id})" for q in left]
    for query in left:
        query.stop()
    assert not names, f"the test left streaming queries running: {names}"


def wait_for(condition, timeout_s: float, what: str, interval_s: float = 0.1):
    """Poll `condition` until it returns a truthy value; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)


def assert_dead_lettered(bootstrap: str, job: str, dead_letter_topic: str, source_topic: str, bad: dict) -> None:
    """Every bad record (reason -> value) is on the dead-letter topic once, with its reason, the
    job's name, and a pointer (topic, partition, offset) back to the very record it rejected."""
    import json
    from joinlab.topics import read_topics
    letters = [json.loads(r.value) for r in read_topics(bootstrap, [dead_letter_topic])]
    assert sorted(letter["reason"] for letter in letters) == sorted(bad)
    sources = {(r.partition, r.offset): r.value for r in read_topics(bootstrap, [source_topic])}
    for letter in letters:
        assert letter["job"] == job and letter["source_topic"] == source_topic
        original = sources[(letter["source_partition"], letter["source_offset"])]
        assert original == bad[letter["reason"]], "the dead letter must point at the record it rejected"


def stop_mid_stream_and_resume(spark, job, bootstrap: str, checkpoint: str, max_offsets_per_trigger: int,
                               batches: int = 3, timeout_s: float = 240):
    """Run `job` until `batches` micro-batches are done, stop it, resume it from the checkpoint
    until it has caught up; returns the resumed query (it must continue, not start again)."""
    from joinlab import runner
    query = runner.start(spark, job, bootstrap, checkpoint, max_offsets_per_trigger=max_offsets_per_trigger)
    wait_for(lambda: query.lastProgress and query.lastProgress["batchId"] >= batches - 1, timeout_s,
             f"{batches} micro-batches")
    query.stop()
    resumed = run_job_to_end(spark, job, bootstrap, checkpoint)
    assert resumed.recentProgress[0]["batchId"] >= batches, "the restart began again from batch 0"
    return resumed


def run_job_to_end(spark, job, bootstrap: str, checkpoint, **kwargs):
    """Run `job` until it has caught up (Trigger.AvailableNow); it must end without an error."""
    from joinlab import runner
    query = runner.start(spark, job, bootstrap, str(checkpoint), available_now=True, **kwargs)
    query.awaitTermination()
    assert query.exception() is None
    return query


# The `joinlab run` processes the crash tests start and kill run a Spark Connect server of their own
# (a driver that dies with them, as a crash kills it), not the test session's. Their JVM compiles
# with C1 only, which starts it and runs its first micro-batches on about a third less CPU than
# C1 + C2 (tweet-views, 100 events, start to first batch: 21-25 s of CPU against 35-37 s, 2 cores),
# leaving a core for the test's own work. The same Spark with less JIT.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"


def run_pattern_process(pattern: str, bootstrap: str, checkpoint, home, log, env: dict | None = None,
                        *options, own_server: bool = True) -> subprocess.Popen:
    """`joinlab run PATTERN` as its own process (and process group: its JVM and Python workers are
    its children, so one killpg takes them all), with a server of its own (`own_server`) or as a
    client of the test session's ($SPARK_REMOTE)."""
    env = {**(own_server_env() if own_server else os.environ), "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
           "LAB_HOME": str(home), **(env or {})}
    if own_server:
        env.update(SPARK_MASTER="local[2]",
                   SPARK_SUBMIT_OPTS=" ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"), SHORT_LIVED_JVM])))
    return subprocess.Popen([sys.executable, "-m", "joinlab", "run", pattern, "--checkpoint", str(checkpoint),
                             *options], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group (a no-op once it is gone) and reap the process."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def checkpoint_declaring(path, *operators: list[str]) -> str:
    """A checkpoint folder whose transformWithState operators declare the state names `operators`
    (their metadata files only, as joinlab.runner reads them)."""
    for op, names in enumerate(operators):
        meta = path / "state" / str(op) / "_metadata" / "v2"
        meta.mkdir(parents=True)
        props = json.dumps({"stateVariables": [{"stateName": n, "stateVariableType": "ValueState"} for n in names]})
        (meta / "3").write_text("v2\n" + json.dumps({"operatorPropertiesJson": props}) + "\n")
    return str(path)


def committed_batches(checkpoint) -> set[int]:
    return {int(p.name) for p in (Path(checkpoint) / "commits").glob("[0-9]*")}


def sigkill_when(pattern: str, bootstrap: str, checkpoint, tmp_path, condition, what: str,
                 env: dict | None = None, log_name: str = "killed", timeout_s: float = 240,
                 interval_s: float = 0.05) -> None:
    """Run `joinlab run PATTERN` in its own process and SIGKILL it (the JVM and Python workers
    with it) as soon as `condition()` holds; fails with the job's log if the job ends first."""
    log_path = Path(tmp_path) / f"{pattern}-{log_name}.log"
    with open(log_path, "wb") as log:
        process = run_pattern_process(pattern, bootstrap, checkpoint, tmp_path, log, env)
        try:
            wait_for(lambda: condition() or process.poll() is not None, timeout_s, what, interval_s=interval_s)
        finally:
            kill_group(process)
    assert process.returncode == -signal.SIGKILL, log_path.read_text()[-3000:]


def re_emitted(records) -> int:
    """Output records that repeat an earlier one exactly (topic, key, value): what an
    at-least-once sink wrote again when a batch was retried after a failure."""
    return len(records) - len({(r.topic, r.key, r.value) for r in records})


def random_batches(rows: list, rng, largest: int = 150) -> list[list]:
    """`rows` cut into consecutive micro-batches of random sizes (1 to `largest`)."""
    batches = []
    while rows:
        size = rng.randint(1, largest)
        batches.append(rows[:size])
        rows = rows[size:]
    return batches
