"""The chaos suite: the patterns under faults that are not a clean stop, each case ending with the
output verified against the batch reference and a count of what was written twice.

Kept small on purpose (a few hundred events per case) so the whole suite stays within `make
test`'s budget; `make soak` is the long run.
"""
import json
import os
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from joinlab import runner
from joinlab import patterns
from joinlab.generate import Disorder, send
from joinlab.topics import create_topics, read_topics, records_on
from joinlab.verify import verify
from tests.conftest import (committed_batches, delete_all_topics, kill_group, re_emitted,
                            run_job_to_end, run_pattern_process, sigkill_when, wait_for)

pytestmark = pytest.mark.spark

# Disorder within every pattern's watermark delay, so lateness does not depend on where a run
# was cut (the lottery's caveat in jobs/lottery/README.md).
WITHIN_THE_DELAY = Disorder(delayed=0.4, max_delay_s=4.0, duplicates=0.1, malformed=0.02)
EXTRA = {"lottery": {"lotteries": 3, "users": 30}}


def events(pattern: str, seed: int, count: int) -> list:
    return patterns.generator(pattern).generate(seed, count, disorder=WITHIN_THE_DELAY, **EXTRA.get(pattern, {}))


def chunks(records: list, n: int) -> list[list]:
    size = -(-len(records) // n)
    return [records[i:i + size] for i in range(0, len(records), size)]


def finish_and_verify(spark, pattern: str, bootstrap: str, checkpoint) -> int:
    """Run the pattern to the end on `checkpoint` in this process, verify its output against the
    reference, and return how many output records it wrote twice (the sink is at-least-once). A
    checkpoint with commits must be resumed, not started again from batch 0."""
    job = patterns.job(pattern)
    committed = committed_batches(checkpoint)
    with runner.services(job, bootstrap):
        query = run_job_to_end(spark, job, bootstrap, checkpoint)
    if committed and query.recentProgress:
        assert query.recentProgress[0]["batchId"] > max(committed), "the restart began again from batch 0"
    report = verify(pattern, bootstrap)
    assert report.ok, "\n".join(report.lines())
    return re_emitted(read_topics(bootstrap, job.OUTPUT_TOPICS))


SIGKILLED = "test_sigkilled_mid_write_and_after_a_commit_and_restarted_each_time"
AT_ONCE = 2  # patterns whose kill rounds run side by side: two short-lived JVMs (conftest.SHORT_LIVED_JVM) on 2 cores


def kill_rounds(pattern: str, bootstrap: str, home, stopping: threading.Event):
    """`joinlab run PATTERN` SIGKILLed $LAB_CHAOS_KILLS times (default 2) on one checkpoint under
    `home`, new input sent before each run: the first mid-write (as soon as its first new output
    records are on the topic, so the batch writing them may be written in part), the next just
    after a commit, and so on in turn; then the last input. Returns the checkpoint and the kill
    points. `stopping` ends it early (the module's teardown)."""
    rng = random.Random(f"{pattern}-{os.environ.get('LAB_CHAOS_SEED', '13')}")
    job = patterns.job(pattern)
    create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
    kills_wanted = int(os.environ.get("LAB_CHAOS_KILLS", "2"))
    parts = chunks(events(pattern, rng.randrange(1000), 100 * (kills_wanted + 1)), kills_wanted + 1)
    checkpoint = home / "cp"
    kills = []
    for round_, part in enumerate(parts[:-1]):
        send(bootstrap, part, progress=False)
        outputs_before, commits_before = records_on(bootstrap, job.OUTPUT_TOPICS), len(committed_batches(checkpoint))
        if round_ % 2 == 0:
            point, reached = "mid-write", lambda: records_on(bootstrap, job.OUTPUT_TOPICS) > outputs_before
        else:
            point, reached = "after a commit", lambda: len(committed_batches(checkpoint)) > commits_before
        sigkill_when(pattern, bootstrap, checkpoint, home, lambda: stopping.is_set() or reached(),
                     f"kill point {point}", log_name=f"kill{round_}", timeout_s=600, interval_s=0.2)
        if stopping.is_set():
            raise RuntimeError(f"{pattern}: stopped before kill point {point}")
        kills.append(point)
    send(bootstrap, parts[-1], progress=False)
    return checkpoint, kills


@pytest.fixture(scope="module")
def killed_runs(request, kafka, tmp_path_factory):
    """The kill rounds (kill_rounds) of every pattern this session runs test_sigkilled... for,
    started in the background in the tests' order, AT_ONCE at a time, each pattern on its own
    topics, checkpoint and processes: one pattern's `joinlab run` starts while another's is killed
    or verified, rather than each waiting for the last. On the session's broker, the earlier
    tests' topics deleted once: these tests do not take `bootstrap`, whose per-test clean-up would
    delete the topics of the patterns still running."""
    wanted = [item.callspec.params["pattern"] for item in request.session.items
              if getattr(item, "originalname", None) == SIGKILLED and item.module is request.module]
    bootstrap = kafka.bootstrap_servers
    delete_all_topics(bootstrap)
    stopping = threading.Event()
    with ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="chaos") as pool:
        runs = {pattern: pool.submit(kill_rounds, pattern, bootstrap, tmp_path_factory.mktemp(pattern), stopping)
                for pattern in wanted}
        yield bootstrap, runs
        stopping.set()  # only runs whose test did not wait for them (a failed or interrupted session) go on: end them
        for run in runs.values():
            run.cancel()


@pytest.mark.timeout(1800)  # two JVM starts per pattern, two patterns at a time: minutes on a loaded 2-core machine
@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_sigkilled_mid_write_and_after_a_commit_and_restarted_each_time(spark, killed_runs, pattern,
                                                                       record_property):
    """`joinlab run PATTERN` is SIGKILLed $LAB_CHAOS_KILLS times (default 2), new input arriving
    between the runs: the first run mid-write (as soon as its first new output records are on the
    topic, so the batch writing them may be written in part), the next just after a commit, and
    so on in turn (kill_rounds, in the background: `killed_runs`). A last run on the same
    checkpoint (in this process) must resume it and give the reference's output. Every pattern
    meets both kill points."""
    bootstrap, runs = killed_runs
    checkpoint, kills = runs[pattern].result(timeout=1500)
    twice = finish_and_verify(spark, pattern, bootstrap, checkpoint)
    record_property("kills", kills)
    record_property("re_emitted", twice)
    print(f"{pattern}: killed {kills}; {twice} output records re-emitted")


def test_the_broker_stopped_then_killed_and_restarted_under_a_running_job_loses_nothing(spark, tmp_path):
    """The broker goes down twice under one `joinlab run`, a clean stop then SIGKILL, and comes back
    each time on the same log directory and port: its records survived, so the job rides each
    outage out, and after each one its output converges to the reference, with no JVM stack in
    its log."""
    import signal
    from joinlab.broker import EmbeddedBroker, free_port
    pattern, job = "tweet-views", patterns.job("tweet-views")
    checkpoint, log_path, data = tmp_path / "cp", tmp_path / "run.log", tmp_path / "kafka"
    port, parts = free_port(), chunks(events(pattern, 1, 600), 3)
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "broker.log", data_dir=data).__enter__()
    bootstrap, cluster = broker.bootstrap_servers, broker.info.cluster_id
    create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
    send(bootstrap, parts[0], progress=False)
    with open(log_path, "wb") as log:
        process = run_pattern_process(pattern, bootstrap, checkpoint, tmp_path, log)
        try:
            wait_for(lambda: committed_batches(checkpoint) or process.poll() is not None, 240, "the first committed batch")
            for fault, part in zip(("stopped", "killed"), parts[1:]):
                if fault == "stopped":
                    broker.__exit__(None, None, None)
                else:
                    os.kill(broker.pid, signal.SIGKILL)
                    broker._proc.wait(timeout=30)
                broker = EmbeddedBroker(port=port, log_path=tmp_path / "broker.log", data_dir=data).__enter__()
                assert broker.info.cluster_id == cluster
                send(bootstrap, part, progress=False)
                wait_for(lambda: verify(pattern, bootstrap).ok or process.poll() is not None, 300,
                         f"the output to converge after the broker was {fault} and came back", interval_s=2)
                assert process.poll() is None, log_path.read_text()[-3000:]
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=120) == 0, log_path.read_text()[-3000:]
        finally:
            kill_group(process)
            broker.__exit__(None, None, None)
    text = log_path.read_text()
    assert "\tat " not in text, text[-3000:]


def test_an_input_topic_deleted_and_recreated_under_a_running_job_stops_it_with_the_topic_offsets_and_reset(
        spark, bootstrap, tmp_path):
    """`tweets` is deleted and created again while `joinlab run` runs: the checkpoint's offsets
    point past the new topic's records, so continuing would skip them. The job must stop on its
    own with one line naming the topic, the offsets and `--reset` (Spark's data-loss error, not its
    stack), exit 1, and `--reset` then converges on what the topics hold."""
    from kafka import KafkaAdminClient
    pattern, job = "tweet-views", patterns.job("tweet-views")
    checkpoint, log_path = tmp_path / "cp", tmp_path / "run.log"
    create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
    send(bootstrap, events(pattern, 1, 200), progress=False)
    with open(log_path, "wb") as log:
        process = run_pattern_process(pattern, bootstrap, checkpoint, tmp_path, log)
        try:
            wait_for(lambda: committed_batches(checkpoint) or process.poll() is not None, 240, "the first committed batch")
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.delete_topics(["tweets"])
            wait_for(lambda: "tweets" not in admin.list_topics(), 60, "tweets to be deleted")
            admin.close()
            create_topics(bootstrap, ["tweets"])
            assert process.wait(timeout=240) == 1
        finally:
            kill_group(process)
    text = log_path.read_text()
    stopped = text[text.index("joinlab run tweet-views: the job stopped"):] if "the job stopped" in text else text[-3000:]
    print(stopped)
    assert re.search(r"the job stopped\. DataLossError: records the checkpoint counts on are gone from Kafka "
                     r"\(.*tweets-\d.*\d+.*\)", stopped), stopped
    assert "`joinlab run tweet-views --reset`" in stopped and "\tat " not in text

    import shutil
    shutil.rmtree(checkpoint)  # what `joinlab run --reset` does
    send(bootstrap, [r for r in events(pattern, 1, 200) if r.topic == "tweets"], progress=False)
    assert finish_and_verify(spark, pattern, bootstrap, checkpoint) >= 0


def immutable(path, on: bool) -> None:
    """chattr +i / -i: a directory nobody can write to, root included (chmod does not stop root)."""
    import subprocess
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"needs chattr on a file system with the immutable flag: {done.stderr.strip()}")


def test_an_unwritable_checkpoint_directory_is_a_clear_error_and_leaves_no_corrupt_checkpoint(
        spark, bootstrap, tmp_path, monkeypatch, capsys):
    """Before the run: `joinlab run` refuses with the directory and the reason. During the run (the
    checkpoint's offset log becomes unwritable after a commit): the query stops with an error
    naming the file, and once the directory is writable again a restart converges."""
    from joinlab import cli
    pattern, job = "tweet-views", patterns.job("tweet-views")
    create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
    send(bootstrap, events(pattern, 3, 300), progress=False)
    checkpoint = tmp_path / "cp"
    checkpoint.mkdir()
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    immutable(checkpoint, True)
    try:
        assert cli.main(["run", pattern, "--checkpoint", str(checkpoint), "--available-now"]) == 2
    finally:
        immutable(checkpoint, False)
    assert f"the checkpoint directory {checkpoint} is not writable (Operation not permitted)" in capsys.readouterr().err
    assert list(checkpoint.iterdir()) == []

    query = runner.start(spark, job, bootstrap, str(checkpoint), max_offsets_per_trigger=60,
                         trigger_interval="200 milliseconds")
    try:
        wait_for(lambda: committed_batches(checkpoint), 240, "the first commit")
        immutable(checkpoint / "offsets", True)
        wait_for(lambda: not query.isActive, 240, "the query to stop on the unwritable offset log")
        text = runner.failure(query.exception())
        assert str(checkpoint / "offsets") in text and "Operation not permitted" in text, text
        print(f"unwritable offset log -> {text}")
    finally:
        query.stop()
        immutable(checkpoint / "offsets", False)
    assert finish_and_verify(spark, pattern, bootstrap, checkpoint) == 0


def test_a_checkpoint_file_is_never_overwritten_so_a_second_run_on_one_checkpoint_is_refused(spark, tmp_path):
    """The lab writes checkpoint files through Hadoop's FileSystem API (joinlab.spark, for speed).
    A file that exists already (the same batch's offsets, written by another run on the same
    checkpoint) must still be refused, never replaced: that is how Spark stops a second run. Asked
    of the server's JVM, where checkpoints are written (a Connect client has none: tests/server_side.py)."""
    from joinlab.spark import CHECKPOINT_FILES, CHECKPOINT_FILES_CONF
    from tests.server_side import server_session
    server = server_session()
    jvm = server._jvm
    managers = getattr(getattr(jvm.org.apache.spark.sql.execution.streaming.checkpointing, "CheckpointFileManager$"),
                       "MODULE$")
    manager = managers.create(jvm.org.apache.hadoop.fs.Path(str(tmp_path)),
                              server._jsparkSession.sessionState().newHadoopConf())
    assert manager.getClass().getName() == CHECKPOINT_FILES_CONF[CHECKPOINT_FILES]
    assert spark.conf.get(CHECKPOINT_FILES) == CHECKPOINT_FILES_CONF[CHECKPOINT_FILES]  # a client's session too
    offsets = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "0"))
    first = manager.createAtomic(offsets, False)
    first.write(1)
    first.close()
    second = manager.createAtomic(offsets, False)
    second.write(2)
    with pytest.raises(Exception, match="FAILED_RENAME_PATH"):
        second.close()
    assert (tmp_path / "0").read_bytes() == bytes([1])


def test_money_lookup_service_down_longer_than_the_timeout_then_back(spark, bootstrap, tmp_path, monkeypatch):
    """While the session lookup service is down, a transaction that needs a lookup is dead-lettered
    with the reason once the timeout passes; a transaction joined from state is not affected; once
    the service is back (same port and token) lookups enrich again. Against the reference, the
    dead-lettered transaction is the only difference."""
    from joinlab.lookup import LookupService
    from tests.test_money_enrichment import outputs, session, tx, use_service, user
    money = patterns.job("money-enrichment")
    create_topics(bootstrap, money.INPUT_TOPICS + money.OUTPUT_TOPICS)
    first = LookupService(bootstrap, topic=money.SESSIONS_TOPIC, port=0).start()
    port, token = first.port, first.token
    use_service(monkeypatch, first, LAB_LOOKUP_TIMEOUT="1 second", LAB_LOOKUP_RETRIES="1")
    query = runner.start(spark, money, bootstrap, str(tmp_path / "cp"), trigger_interval="500 milliseconds")
    enriched = lambda: {json.loads(r.value)["tx_id"]: json.loads(r.value) for r in outputs(bootstrap)}  # noqa: E731
    letters = lambda: {json.loads(r.value)["key"]: json.loads(r.value)  # noqa: E731
                       for r in read_topics(bootstrap, [money.DEAD_LETTERS_TOPIC])}
    try:
        send(bootstrap, [user(1, 1, 0), session("s1", 1, 0), tx("on-time", "s1", 5), session("clock", 2, 400)],
             progress=False)
        wait_for(lambda: "on-time" in enriched(), 240, "the on-time transaction")
        first.stop()  # down: connections refused
        first = None
        send(bootstrap, [tx("while-down", "s1", 10), session("s2", 1, 420), tx("from-state", "s2", 421),
                         session("clock2", 2, 460)], progress=False)
        wait_for(lambda: "while-down" in letters() and "from-state" in enriched(), 240,
                 "the dead letter of the lookup that found the service down, and the state join beside it")
        with LookupService(bootstrap, topic=money.SESSIONS_TOPIC, port=port, token=token):
            send(bootstrap, [tx("back-up", "s1", 15), session("clock3", 2, 520)], progress=False)
            wait_for(lambda: "back-up" in enriched(), 240, "a lookup once the service is back")
            assert query.isActive and query.exception() is None
    finally:
        query.stop()
        if first:
            first.stop()
    reason = letters()["while-down"]["reason"]
    assert reason.startswith("lookup"), reason
    assert enriched()["back-up"]["enriched_by"] == "lookup" and enriched()["back-up"]["session_id"] == "s1"
    report = verify("money-enrichment", bootstrap)
    assert report.missing == ["while-down"] and not (report.extra or report.stale or report.mismatched), \
        "\n".join(report.lines())
    print(f"money-enrichment: lookup down -> {reason!r}; {re_emitted(read_topics(bootstrap, money.OUTPUT_TOPICS))} "
          "output records re-emitted")


def test_the_spark_worker_killed_mid_stream_the_job_waits_says_so_and_goes_on_once_the_worker_is_back(
        spark, tmp_path, record_property):
    """On the native stack (`joinlab lab up`), `joinlab run tweet-views --available-now` runs on the
    standalone master: 1,200 events, 400 per batch. After two committed batches the Spark worker
    and its executor (the worker's whole process tree) are SIGKILLed: the job neither fails nor ends, and
    says on stderr that it has no executor (Spark logs one "Lost executor" line, then waits in
    silence). `joinlab lab up` starts the missing worker; the master gives the job a new executor,
    the job finishes (exit 0) and its output verifies. A restart from that checkpoint with new
    input converges too."""
    import signal
    import subprocess
    import sys
    import time

    from joinlab.stack import procs
    from tests.conftest import ROOT, SHORT_LIVED_JVM
    from tests.test_lab_stack import joinlab, lab_env, port_of
    pattern, job = "tweet-views", patterns.job("tweet-views")
    env = lab_env(tmp_path)
    began = time.monotonic()
    up = joinlab(env, "lab", "up", timeout=420)
    run = log = None
    try:
        assert up.returncode == 0, f"lab up failed:\n{up.stdout}\n{up.stderr}"
        bootstrap = f"127.0.0.1:{port_of(env, 'broker')}"
        records = events(pattern, 21, 1500)
        send(bootstrap, records[:1200], progress=False)
        checkpoint, log_path = tmp_path / "cp", tmp_path / "run.log"
        log = open(log_path, "wb")
        run = subprocess.Popen([sys.executable, "-m", "joinlab", "run", pattern, "--available-now",
                                "--max-offsets-per-trigger", "400", "--checkpoint", str(checkpoint)],
                               cwd=ROOT, env={**env, "SPARK_SUBMIT_OPTS": SHORT_LIVED_JVM}, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: len(committed_batches(checkpoint)) >= 2 or run.poll() is not None, 300,
                 "two committed batches")
        assert run.poll() is None, log_path.read_text()[-3000:]
        worker = json.loads((tmp_path / "lab" / "run" / "spark-worker.json").read_text())["pid"]
        doomed = procs.tree([worker])
        assert any("CoarseGrainedExecutorBackend" in open(f"/proc/{pid}/cmdline").read() for pid in doomed), \
            "the job's executor should run under the worker"
        killed_after = sorted(committed_batches(checkpoint))
        for pid in doomed:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: "no Spark executor has run this job" in log_path.read_text() or run.poll() is not None, 120,
                 "the job to say it has no executor")
        assert run.poll() is None, "the job ended without its worker:\n" + log_path.read_text()[-3000:]

        again = joinlab(env, "lab", "up", timeout=420)
        assert again.returncode == 0 and re.search(r"spark-worker\s+started", again.stdout), again.stdout + again.stderr
        assert run.wait(timeout=300) == 0, log_path.read_text()[-3000:]
        text = log_path.read_text()
        assert "a Spark executor is back" in text and "the job stopped" not in text, text[-3000:]
        stack = [line for line in text.splitlines()
                 if line.startswith("\tat ") or re.match(r"[a-z][\w$]*(\.[\w$]+)*\.[\w$]*(Exception|Error)\b", line)]
        assert not stack and "Connection reset" not in text, \
            "the lost executor is logged with a stack:\n" + text[-3000:]
        report = verify(pattern, bootstrap)
        assert report.ok, "\n".join(report.lines())
        twice = re_emitted(read_topics(bootstrap, job.OUTPUT_TOPICS))
        finished_after = sorted(committed_batches(checkpoint))
        assert len(finished_after) > len(killed_after)

        send(bootstrap, records[1200:], progress=False)
        twice_in_all = finish_and_verify(spark, pattern, bootstrap, checkpoint)
    finally:
        if run is not None:
            kill_group(run)
            log.close()
        joinlab(env, "lab", "down", timeout=120)
    record_property("re_emitted", twice_in_all)
    print(f"{pattern}: worker killed after batches {killed_after}; the job went on to batch {finished_after[-1]} "
          f"once `lab up` restarted the worker ({twice} output records re-emitted), and a restart converged "
          f"({twice_in_all} re-emitted in all); {time.monotonic() - began:.0f} s")
