"""What a person sees while a job runs: `joinlab run`'s line per micro-batch, the Spark UI setting,
and the log settings. The numbers are checked against the topics themselves on a real broker and
a real Spark run."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from joinlab import logs
from joinlab.status import NO_EXECUTOR_S, NO_WATERMARK, ExecutorWatch, Watcher, batch_status
from joinlab.topics import records_on
from tests.conftest import ROOT, committed_batches, kill_group, wait_for
from tests.server_side import own_server_env, server_session

LOTTERY_PROGRESS = {
    "id": "q", "runId": "r", "name": "lottery", "timestamp": "2026-11-22T10:00:02.000Z", "batchId": 7,
    "batchDuration": 1234, "numInputRows": 90,
    "durationMs": {"addBatch": 1100, "triggerExecution": 1234},
    "eventTime": {"avg": "2026-01-01T00:00:09.000Z", "max": "2026-01-01T00:00:12.000Z",
                  "min": "2026-01-01T00:00:05.000Z", "watermark": "2026-01-01T00:00:07.000Z"},
    "stateOperators": [{"operatorName": "transformWithStateExec", "numRowsTotal": n, "numRowsUpdated": 1,
                        "memoryUsedBytes": 1} for n in (12, 40, 3)],
    "sources": [{"description": "kafka", "numInputRows": 90,
                 "startOffset": '{"lottery-events":{"0":10,"1":20},"user-events":{"0":5}}',
                 "endOffset": '{"lottery-events":{"0":40,"1":45},"user-events":{"0":40}}'}],
    "sink": {"description": "kafka", "numOutputRows": -1},
    "observedMetrics": {"records_out": {"lottery-winners": 2, "lottery-rejections": 9, "lottery-dlq": 1}},
}
LOTTERY_TOPICS = (["lottery-events", "user-events"], ["lottery-winners", "lottery-rejections", "lottery-dlq"],
                  "lottery-dlq")


def test_the_status_line_shows_each_number_of_the_batch():
    status = batch_status(LOTTERY_PROGRESS, *LOTTERY_TOPICS)
    assert status.line() == ("batch 7 | in lottery-events 55, user-events 35 | out lottery-winners 2, "
                             "lottery-rejections 9 | dead letters 1 | 1.23 s | watermark 2026-01-01 00:00:07 | "
                             "state rows 12 / 40 / 3")
    assert json.loads(status.json()) == {
        "batch": 7, "records_in": {"lottery-events": 55, "user-events": 35},
        "records_out": {"lottery-winners": 2, "lottery-rejections": 9}, "dead_letters": 1, "duration_s": 1.234,
        "watermark": "2026-01-01T00:00:07.000Z", "state_rows": [12, 40, 3], "timestamp": "2026-11-22T10:00:02.000Z",
        "old_versions": 0}


def test_a_batch_of_records_the_job_already_had_says_so_instead_of_a_bare_out_0():
    """A generator run again with the same --seed: every record valid, no state changed, nothing out."""
    ops = [dict(op, numRowsUpdated=0) for op in LOTTERY_PROGRESS["stateOperators"]]
    again = dict(LOTTERY_PROGRESS, stateOperators=ops, observedMetrics={"records_out": {"lottery-dlq": 1}})
    assert batch_status(again, *LOTTERY_TOPICS).line().endswith(
        "| state rows 12 / 40 / 3 | 89 old versions ignored: records the job already had")
    for changed in (dict(again, stateOperators=LOTTERY_PROGRESS["stateOperators"]),  # a state row written
                    dict(again, observedMetrics={"records_out": {"lottery-winners": 1}}),  # a record out
                    dict(again, stateOperators=[])):  # a job without state knows nothing of versions
        assert "old versions" not in batch_status(changed, *LOTTERY_TOPICS).line()


def test_a_first_batch_reads_from_offset_zero_and_a_job_without_watermark_shows_none():
    first = dict(LOTTERY_PROGRESS, batchId=0, eventTime={}, stateOperators=[], observedMetrics={},
                 sources=[{"startOffset": None, "endOffset": {"lottery-events": {"0": 4}}}])
    status = batch_status(first, *LOTTERY_TOPICS)
    assert status.records_in == {"lottery-events": 4, "user-events": 0}
    assert status.records_out == {"lottery-winners": 0, "lottery-rejections": 0} and status.dead_letters == 0
    assert "watermark" not in status.line() and "state rows" not in status.line()
    unset = batch_status(dict(LOTTERY_PROGRESS, eventTime={"watermark": NO_WATERMARK}), *LOTTERY_TOPICS)
    assert "| watermark - |" in unset.line()


def test_the_watcher_reports_each_executed_batch_once_and_skips_idle_triggers():
    job = type("Job", (), {"INPUT_TOPICS": LOTTERY_TOPICS[0], "OUTPUT_TOPICS": LOTTERY_TOPICS[1],
                           "DEAD_LETTERS_TOPIC": "lottery-dlq"})
    idle = dict(LOTTERY_PROGRESS, batchId=8, numInputRows=0, durationMs={"triggerExecution": 3})
    no_data = dict(LOTTERY_PROGRESS, batchId=8, numInputRows=0)  # ran: the watermark moved
    watcher = Watcher(job)
    assert [s.batch for s in watcher.new([LOTTERY_PROGRESS, idle])] == [7]
    assert watcher.new([LOTTERY_PROGRESS, idle]) == []
    assert [s.batch for s in watcher.new([LOTTERY_PROGRESS, idle, no_data])] == [8]


def test_a_job_without_executors_for_a_while_is_told_once_and_once_more_when_one_is_back():
    """The Spark worker killed under a running job: Spark logs "Lost executor" once and the batch
    waits in silence (test_chaos.py runs it for real); the watch says so and says when it goes on."""
    counts, said = [1, 0, 0, 0, 0, 2, 0], []
    watch = ExecutorWatch(lambda: counts.pop(0), "tweet-views", said.append)
    for now in (0, 1, 2, 1 + NO_EXECUTOR_S - 0.5, 1 + NO_EXECUTOR_S, 20, 21):
        watch.check(now)
    assert len(said) == 2, said
    assert said[0].startswith(f"tweet-views: no Spark executor has run this job for {NO_EXECUTOR_S:.0f} s")
    assert "`joinlab lab up`" in said[0] and "`joinlab lab ps`" in said[0]
    assert said[1] == "tweet-views: a Spark executor is back (2); the job goes on"
    local = ExecutorWatch(lambda: None, "tweet-views", said.append)  # local mode: nothing to lose
    starting = ExecutorWatch(lambda: 0, "tweet-views", said.append)  # none yet: Spark's own warning says it
    for now in (0, 100):
        local.check(now)
        starting.check(now)
    assert len(said) == 2


# --- logs ---------------------------------------------------------------------------------------

def test_the_log_level_lives_in_one_place_and_info_shows_everything(monkeypatch):
    """The JVMs start with the package's log4j2 file at $LAB_SPARK_LOG_LEVEL; each of its quiet rules
    says why and denies its messages at WARN, and lets them through at INFO."""
    lines = logs.CONFIGURATION.read_text().splitlines()
    rules = [line.split(".")[1] for line in lines if line.endswith("onMatch = ${sys:joinlab.log.quiet:-DENY}")]
    assert len(rules) >= 15 and not any("\\" in line for line in lines)  # a backslash would start an escape
    for rule in rules:  # each after a comment that says why
        assert lines[lines.index(next(x for x in lines if x.startswith(f"logger.{rule}.name = "))) - 1].startswith("# ")
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "warn")
    assert logs.java_options() == (f"-Dlog4j2.configurationFile=file:{logs.CONFIGURATION} "
                                   "-Djoinlab.log.level=WARN -Djoinlab.log.quiet=DENY")
    assert logs.quiet_line("WARNING: Using incubator modules: jdk.incubator.vector\n")
    assert logs.quiet_line("Streaming TransformWithStateInPandas Python worker Starting execution of UDF: f.\n")
    assert not logs.quiet_line("Traceback (most recent call last):\n")
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "INFO")
    assert "-Djoinlab.log.level=INFO -Djoinlab.log.quiet=NEUTRAL" in logs.java_options() and not logs.quieting()
    monkeypatch.setenv(logs.LEVEL_VARIABLE, "LOUD")
    try:
        logs.level()
        raise AssertionError("an unknown level must be refused")
    except ValueError as exc:
        assert "INFO" in str(exc)


# What the driver logged when a Spark worker was SIGKILLed while the driver cleaned up a broadcast
# on its executor (test_chaos's worker kill, one run in four): Spark's own "Lost executor" line,
# then each layer of the broken call telling the same loss again.
EXECUTOR_LOST = [
    ("org.apache.spark.scheduler.TaskSchedulerImpl", "ERROR",
     "Lost executor 0 on 127.0.0.1: worker lost: 127.0.0.1:46171 got disassociated", True),
    ("org.apache.spark.network.client.TransportResponseHandler", "ERROR",
     "Still have 1 requests outstanding when connection from /127.0.0.1:36384 is closed", False),
    ("org.apache.spark.network.client.TransportClient", "ERROR",
     "Failed to send RPC RPC 6072639868627424233 to /127.0.0.1:36384", False),
    ("org.apache.spark.rpc.netty.NettyRpcEnv", "WARN",
     "Ignored failure: java.io.IOException: Failed to send RPC RPC 6072639868627424233 to /127.0.0.1:36384: "
     "io.netty.channel.StacklessClosedChannelException", False),
    ("org.apache.spark.storage.BlockManagerMasterEndpoint", "WARN",
     "No more replicas available for broadcast_5_piece0!", False),
    ("org.apache.spark.storage.BlockManagerMasterEndpoint", "WARN",
     "Error trying to remove broadcast 5 from block manager BlockManagerId(0, 127.0.0.1, 43283, None)", False),
    ("org.apache.spark.network.server.TransportChannelHandler", "WARN",
     "Exception in connection from /127.0.0.1:36384", False),
]


@pytest.mark.spark
def test_a_lost_executor_is_one_line_in_the_drivers_log(spark):
    """The server's log4j, configured by the lab at WARN (the log4j2 file of joinlab.logs that its
    JVM starts with), passes Spark's "Lost executor" line and denies the echoes of the same loss
    (asked of the live configuration's logger filters)."""
    for logger, level, message, shown in EXECUTOR_LOST:
        assert passes(logger, level, message) == shown, f"{logger} {level} {message!r}"


KAFKA_OFFSETS = "org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin"


@pytest.mark.spark
def test_a_retried_kafka_offset_request_is_quiet_and_the_offsets_it_found_are_shown(spark):
    """Spark's Kafka source retries an end-offset request that failed (a topic being recreated),
    logging the failure with a stack: quiet. What it found wrong stays in the log."""
    assert not passes(KAFKA_OFFSETS, "WARN", "Error in attempt 1 getting Kafka offsets: ")
    assert passes(KAFKA_OFFSETS, "WARN", "Found incorrect offsets in some partitions (partition, previous "
                                               "offset, fetched offset): List((tweets-0,73,0))")


@pytest.mark.spark
def test_the_query_failure_a_client_reports_is_quiet_in_the_servers_log(spark):
    """A failing query's JVM stack (MicroBatchExecution's "terminated with error") stays out of the
    server's log: the client that awaits the query says why in a line (joinlab.runner.failure). It was
    set by joinlab.runner.quiet_failures in the client's JVM; a Connect client has none, so it is a
    rule of the server's log4j2 file now (joinlab/log4j2.properties)."""
    micro_batches = "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution"
    assert not passes(micro_batches, "ERROR", "Query tweet_views [id = 1, runId = 2] terminated with error")
    assert passes(micro_batches, "WARN", "Some other warning of the micro-batch loop")


@pytest.mark.spark
def test_a_stopped_clients_late_release_is_quiet_and_other_connect_errors_are_shown(spark):
    """A client ends its session while its last executions' results are still being freed in the
    background (perf.connect_soak saw it at 4 of 120 client stops): the server logs that late release
    as an RPC error with a stack, though nothing is left to free. Quiet; any other RPC error is not."""
    errors = "org.apache.spark.sql.connect.utils.ErrorUtils"
    session = "2e664c01-bda4-4571-b24f-52c36587e37f"
    assert not passes(errors, "WARN", f"SessionHolder not found during error handling for releaseExecute. UserId: "
                                      f", SessionId: {session}. Error details will not be available for FetchErrorDetails.")
    assert not passes(errors, "ERROR", f"Spark Connect RPC error during: releaseExecute. UserId: . SessionId: {session}.")
    assert passes(errors, "ERROR", f"Spark Connect RPC error during: execute. UserId: . SessionId: {session}.")


def passes(logger: str, level: str, message: str) -> bool:
    """Whether the server's live log4j configuration lets this event through (level and filters);
    its JVM is this process's child (tests/server_side.py)."""
    jvm = server_session()._jvm
    assert str(jvm.java.lang.System.getProperty("log4j2.configurationFile")).startswith("file:"), \
        "the server's JVM starts with the lab's log4j2 file (joinlab.logs.java_options)"
    log4j = jvm.org.apache.logging.log4j
    config = log4j.LogManager.getContext(False).getConfiguration().getLoggerConfig(logger)  # or its nearest ancestor's
    passes_level = config.getLevel().isLessSpecificThan(log4j.Level.getLevel(level))
    event = (log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName(logger).setLevel(log4j.Level.getLevel(level))
             .setMessage(log4j.message.SimpleMessage(message)).build())
    verdict = config.getFilter().filter(event).name() if config.getFilter() else "NEUTRAL"
    return passes_level and verdict != "DENY"


@pytest.mark.spark
def test_at_info_spark_shows_everything_it_quiets_at_warn(tmp_path):
    """A driver started at LAB_SPARK_LOG_LEVEL=INFO prints Spark's INFO lines and the warnings the
    lab quiets at WARN (pyspark alone would drop INFO lines: it counts as a shell). The driver is the
    Connect server the script starts (no $SPARK_REMOTE, no lab): its log level is its JVM's log4j2 file."""
    script = ("from joinlab.spark import session, stop; s = session('info'); s.range(3).count(); stop(s)")
    env = {**own_server_env(), "LAB_HOME": str(tmp_path), "SPARK_MASTER": "local[1]", "LAB_SPARK_LOG_LEVEL": "INFO"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert " INFO SparkContext: Running Spark version" in done.stderr
    assert "incubator modules" in done.stderr and "NativeCodeLoader" in done.stderr


STOP_SCRIPT = """
import json, pathlib, sys
import psutil
from joinlab.spark import session, stop
folder = pathlib.Path(sys.argv[1])
(folder / "in").mkdir()
(folder / "in" / "a.json").write_text("".join(json.dumps({"k": i % 3}) + "\\n" for i in range(20)))
spark = session("stop")
query = (spark.readStream.schema("k int").json(str(folder / "in")).groupBy("k").count().writeStream
         .format("noop").outputMode("update").option("checkpointLocation", str(folder / "cp"))
         .trigger(availableNow=True).start())
query.awaitTermination()
jvms = [p for p in psutil.Process().children() if p.name() == "java"]
before = [p.pid for p in jvms if p.is_running()]
stop(spark)
try:
    session("again")
    again = "a second session"
except Exception as exc:
    again = f"{type(exc).__name__}: {exc}"
print(json.dumps({"before": len(before), "after": [p.pid for p in jvms if psutil.pid_exists(p.pid)], "again": again}))
"""


@pytest.mark.spark
def test_a_stopped_session_leaves_no_spark_jvm_behind(tmp_path):
    """A process that runs its own server (a notebook kernel without a lab after lab.stop(), `joinlab
    demo`): the lab's stop ends the server and its JVM, so nothing of it (Spark's StateStore
    maintenance task, which would log "Error running maintenance task" with a stack at its next run,
    the Kafka producers) outlives the session in that process. It ran a stateful query first.
    A session asked for after that is refused with what to do, not sent to an empty address."""
    env = {**own_server_env(), "LAB_HOME": str(tmp_path), "SPARK_MASTER": "local[1]", "LAB_SPARK_UI": "false"}
    done = subprocess.run([sys.executable, "-c", STOP_SCRIPT, str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["before"], found["after"]) == (1, []), done.stderr[-3000:]
    # A process starts its own server once: a session asked for after that says so, in a line.
    assert found["again"].startswith("ServerError: this process's own Spark server was stopped"), found["again"]


# --- Spark UI -------------------------------------------------------------------------------------

def test_the_spark_ui_is_on_in_the_lab_and_off_in_tests(monkeypatch):
    from joinlab.spark import ui_enabled
    assert os.environ["LAB_SPARK_UI"] == "false" and not ui_enabled()  # tests/conftest
    monkeypatch.delenv("LAB_SPARK_UI")
    assert ui_enabled()
    for off in ("0", "no", "False", "off"):
        monkeypatch.setenv("LAB_SPARK_UI", off)
        assert not ui_enabled()


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}  # 127.0.0.1 in /proc/net/tcp, and as ::ffff:127.0.0.1


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_joinlab_run_prints_a_line_per_batch_that_matches_the_topics_and_the_ui_answers_on_loopback(
        tmp_path, bootstrap):
    """`joinlab run tweet-views --json` with the UI on: the lines add up to what is on the topics,
    the UI answers on 127.0.0.1 only, a quieted warning never shows, and Ctrl-C ends it cleanly."""
    from generators.tweet_views import main as generate
    generate(["--count", "300", "--seed", "3", "--malformed", "0.05", "--bootstrap", bootstrap,
              "--no-progress"])
    sent = records_on(bootstrap, ["users", "tweets"])
    # its own server (the test session's runs no UI), whose UI and log are the job's
    env = {**own_server_env(), "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(tmp_path),
           "SPARK_MASTER": "local[2]", "LAB_SPARK_UI": "true", "LAB_SPARK_LOG_LEVEL": "WARN"}
    out, err = tmp_path / "run.out", tmp_path / "run.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "joinlab", "run", "tweet-views", "--json",
                                    "--checkpoint", str(tmp_path / "checkpoint")], cwd=ROOT, env=env,
                                   stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            def lines():
                return [json.loads(line) for line in out.read_text().splitlines()]
            wait_for(lambda: sum(sum(b["records_in"].values()) for b in lines()) >= sent
                     or process.poll() is not None, 480, "batches that read every input record", 0.5)
            assert process.poll() is None, err.read_text()[-3000:]
            url = re.search(r"Spark UI (http://\S+)", err.read_text()).group(1)
            assert url.startswith("http://127.0.0.1:")
            with urllib.request.urlopen(f"{url}/StreamingQuery/", timeout=30) as page:
                assert page.status == 200 and "tweet_views" in page.read().decode()
            listening = _listening_addresses(int(url.rsplit(":", 1)[1]))
            assert listening and listening <= LOOPBACK, f"the UI listens on {listening}, not 127.0.0.1 only"
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 0, err.read_text()[-3000:]
        finally:
            kill_group(process)
    batches = lines()
    assert [b["batch"] for b in batches] == sorted({b["batch"] for b in batches})
    assert sum(sum(b["records_in"].values()) for b in batches) == sent
    assert sum(b["records_out"]["tweet-views"] for b in batches) == records_on(bootstrap, ["tweet-views"]) > 0
    assert sum(b["dead_letters"] for b in batches) == records_on(bootstrap, ["tweet-views-dlq"]) > 0
    assert batches[-1]["state_rows"] and batches[-1]["state_rows"][0] > 0
    assert batches[-1]["watermark"] is None  # tweet views keeps every user and tweet: no watermark
    shown = err.read_text()
    assert "Traceback" not in shown and "tweet-views: stopping after the running batch (Ctrl-C)" in shown, shown[-3000:]
    for noise in ("incubator modules", "NativeCodeLoader", "Disabling AQE", "adaptive.enabled", "could not bind",
                  "Failed to cancel job group", "doesn't contain a value",
                  "TransformWithStateInPandas Python worker", "log4j profile"):
        assert noise not in shown, f"{noise!r} should be quiet:\n{shown[-3000:]}"


@pytest.mark.spark
def test_a_stop_waits_for_the_running_batch_so_none_is_left_half_done(spark, bootstrap, tmp_path):
    """Ctrl-C in `joinlab run`, a notebook's lab.stop() and the bench stop a query between batches:
    caught while a batch runs (its offsets logged, its commit not yet), the stop lets it commit, so
    no batch's tasks are cancelled (each cancelled write logs its abort with a stack) and none is
    run again on restart. The batch caught is one after the first: the first (start-up) may take
    longer than the trigger, and the next one then starts at once, with no gap to stop in; later
    batches take less than the trigger, so one ends well before the next."""
    import jobs.tweet_views.parts as tweet_views
    from joinlab import runner
    from joinlab.generate import send
    from joinlab.topics import create_topics
    from generators.tweet_views import generate as tweet_views_events

    checkpoint = tmp_path / "cp"

    def planned() -> set[int]:
        return {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}

    create_topics(bootstrap, tweet_views.INPUT_TOPICS + tweet_views.OUTPUT_TOPICS)
    send(bootstrap, tweet_views_events(5, 600), progress=False)
    query = runner.start(spark, tweet_views, bootstrap, str(checkpoint), max_offsets_per_trigger=150,
                         trigger_interval="3 seconds")
    try:
        wait_for(lambda: {b for b in planned() - committed_batches(checkpoint) if b >= 1}, 240,
                 "a batch after the first planned and not yet committed", interval_s=0.02)
        runner.stop_between_batches(query, timeout_s=60)
    finally:
        query.stop()
    assert not query.isActive
    assert planned() == committed_batches(checkpoint), "a batch was stopped half done"
