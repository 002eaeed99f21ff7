"""The runner: starts a pattern's query (joinlab.patterns.Job.query, Kafka to Kafka) with a
checkpoint, a trigger and a name, refuses a checkpoint it cannot continue from, says a failed
query's error in a line, and reports a participant's progress to the room's board."""
from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from joinlab import kafka_settings, patterns
from joinlab.checkpoint_state import declared
from joinlab.config import checkpoints, lab_home, on_server, participant, participant_max_offsets
from joinlab.kit import solutions
from joinlab.kit.kafka import Kafka
from joinlab.patterns import Job
from joinlab.spark import ServerError, lab_server, no_connector, pickle_by_value
from joinlab.topics import own


class CheckpointError(RuntimeError):
    """A checkpoint this job cannot continue from; the message says why and what to run."""


def start(spark: SparkSession, job: Job, bootstrap: str, checkpoint: str, *,
          available_now: bool = False, max_offsets_per_trigger: int | None = None,
          trigger_interval: str = "1 second", name: str | None = None,
          solution: ModuleType | None = None, fail_on_data_loss: bool = True,
          input_prefix: str = "", output_prefix: str = "", counted: bool = False) -> StreamingQuery:
    """Start `job`'s query (its `query`: Kafka to Kafka) reading its inputs from the beginning (or
    from its checkpoint, on restart), with the processors of `solution` (a candidate's module; None:
    the lab's own). With `fail_on_data_loss` the query stops when its checkpointed offsets are gone
    from the broker. `input_prefix` goes before every input topic's name, and the query sees each
    record under its topic's own name (`make up`'s warm-up reads topics of its own); `output_prefix`
    goes before every output topic's name (a notebook's job writes apart); `counted`: each
    micro-batch's progress counts the rows per output topic (`observedMetrics[COUNTED]`, which
    joinlab.status reads)."""
    lab = lab_server(spark)
    if not lab and not on_server(checkpoint):
        raise CheckpointError(
            f"the checkpoint {checkpoint} is a path on this machine, and the Spark server is not the lab's: it "
            f"would write its own folder of that name, and this client would read another. Name one on the "
            f"server's side with a URI: $LAB_CHECKPOINTS (file:///srv/spark/checkpoints, s3a://bucket/lab) or "
            f"--checkpoint URI (docs/operations.md#your-own-spark).")
    check_state_layout(job, checkpoint, solution, spark)
    if participant():  # in a room: no participant's batches so large that everyone else's wait (config)
        max_offsets_per_trigger = min(filter(None, [max_offsets_per_trigger, participant_max_offsets()]))
    kafka = Kafka(bootstrap, checkpoint, input_prefix, output_prefix, max_offsets_per_trigger, fail_on_data_loss,
                  tuple(job.OUTPUT_TOPICS) if counted else (), settings=kafka_settings.spark_options())
    try:
        writer = job.query(spark, kafka, solution)
    except AnalysisException as exc:
        if "Failed to find data source: kafka" in str(exc):
            raise ServerError(f"the Spark Connect server has no Kafka connector: {no_connector()}") from None
        raise
    if name:
        writer = writer.queryName(name)
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger_interval)
    if not lab:  # the modules imported since the session was made: a notebook's second pattern, its solution
        pickle_by_value()
    with configured(spark, job):
        query = writer.start()
    report_progress(query, bootstrap, patterns.name(job))
    return query


# Where a participant's queries report their progress for the room's board (joinlab.room.board):
# Spark Connect keeps a session's queries to that session, so only the client that started a query
# can say how it goes. Never a participant's topic: their names start with a letter or a digit.
PROGRESS_TOPIC = "_room.progress"
REPORT_S = 5.0


def report_progress(query: StreamingQuery, bootstrap: str, pattern: str) -> None:
    """In a room (a participant's query, on a broker with PROGRESS_TOPIC, which `lab up --room`
    makes), send the query's last progress there every REPORT_S, from a daemon thread of this
    process that ends with the query or the process."""
    who = participant()
    if not who:
        return
    from joinlab.topics import plain_consumer, producer
    consumer = plain_consumer(bootstrap)
    try:
        if PROGRESS_TOPIC not in consumer.topics():  # listing it creates nothing: no room, no board
            return
    finally:
        consumer.close()

    def loop() -> None:
        sender = producer(bootstrap)
        key = f"{who}/{query.name}".encode()
        try:
            while query.isActive:
                if last := as_dict(query.lastProgress):
                    body = {"participant": who, "query": query.name, "pattern": pattern, "sent_ms": int(time.time() * 1000),
                            "progress": last}
                    sender.send(PROGRESS_TOPIC, key=key, value=json.dumps(body).encode())
                time.sleep(REPORT_S)
        except Exception:  # noqa: BLE001 - the query's session ended under us: nothing more to report
            pass
        finally:
            sender.close(timeout=5)
    threading.Thread(target=loop, name=f"report-{query.name}", daemon=True).start()


def as_dict(progress: Any) -> dict:
    """A StreamingQueryProgress (or a dict already) as a plain dict; {} for None. As a classic
    session gives it: numInputRows, and each observed metric as {field: value} (Spark Connect's
    progress gives the one per source, the other as its row's values and schema)."""
    p = (json.loads(progress.json) if hasattr(progress, "json") else progress) or {}
    if p and p.get("numInputRows") is None:  # Spark Connect's progress leaves it to its sources
        p = dict(p, numInputRows=sum(source.get("numInputRows") or 0 for source in p.get("sources") or []))
    metrics = p.get("observedMetrics") or {}
    if any(isinstance(m, dict) and "schema" in m for m in metrics.values()):
        p = dict(p, observedMetrics={name: dict(zip((f["name"] for f in m["schema"]["fields"]), m["values"]))
                                     if isinstance(m, dict) and "schema" in m else m
                                     for name, m in metrics.items()})
    return p


# A checkpoint's files are written by the Spark server, which in a room runs as another Unix user
# than the participant whose LAB_HOME holds the checkpoint: the participant can neither delete the
# server's files nor have the server write in a folder only they may write in. So a checkpoint is
# started afresh by renaming the old one aside (within its folder: that needs write permission on
# the folder only, which is the participant's), and, in a room, made a folder every user may write in.

def fresh_checkpoint(path: str) -> None:
    """Start the checkpoint `path` empty (`joinlab run --reset`, a notebook's `start_job`): the old
    one renamed aside to `<folder>/.<name>.old-<UTC time>`, then removed as far as this user may
    (the server's files stay where only the server's user may delete them). A rename that fails
    raises CheckpointError: a job started on the old checkpoint would resume from it. In a room
    (config.participant()) the new, empty folder is made for the server to write in (checkpoint_dir).
    A checkpoint on the server's side (config.on_server) is not this client's to delete: refused."""
    if on_server(path):
        raise CheckpointError(
            f"the checkpoint {path} is on the Spark server's side, where the lab deletes nothing: delete it "
            f"there, or start afresh on another (`joinlab run PATTERN --checkpoint URI`, or $LAB_CHECKPOINTS).")
    path = os.path.abspath(path)
    if os.path.lexists(path):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.old-{stamp}")
        try:
            os.rename(path, aside)
        except OSError as exc:
            raise CheckpointError(
                f"cannot start the checkpoint {path} afresh: renaming it aside to {aside} failed "
                f"({exc.strerror or exc}), so it is still there and a job started on it would resume from it. "
                f"Make its folder {os.path.dirname(path)} writable for you, or choose another checkpoint "
                f"(`joinlab run PATTERN --checkpoint DIR`).") from exc
        shutil.rmtree(aside, ignore_errors=True)  # what the server's user wrote stays, out of the way
    if participant():
        checkpoint_dir(path)


def checkpoint_dir(path: str) -> str:
    """`path`, a folder the Spark server writes in (a checkpoint), created if missing. In a room
    Spark runs as a user of its own (joinlab.room.hub.spark_user): a participant's folder gets mode
    0777, set explicitly (the umask would take bits off); root's (the instructor at the lab's
    console) is handed to that user. Otherwise its mode is left as it is. A checkpoint on the server's
    side (config.on_server) is the server's to make: returned as it is."""
    if on_server(path):
        return path
    from joinlab.stack import procs
    os.makedirs(path, exist_ok=True)
    if participant():
        os.chmod(path, 0o777)
    elif os.geteuid() == 0 and (server := procs.owner(procs.load(procs.CONNECT))) not in (None, 0):
        os.chown(path, server, -1)
    return path


def new_checkpoint(prefix: str) -> str:
    """A checkpoint no run has used, named `prefix-...`: a new folder in LAB_HOME, or a new place
    under $LAB_CHECKPOINTS where that is the server's side (config.on_server)."""
    root = checkpoints()
    if on_server(root):
        return f"{root.rstrip('/')}/{prefix}-{uuid.uuid4().hex[:12]}"
    return checkpoint_dir(tempfile.mkdtemp(prefix=f"{prefix}-", dir=lab_home()))


def operator_state(checkpoint: str, spark: SparkSession | None = None) -> list[set[str]]:
    """The state variables of each stateful operator of a checkpoint, from the operator's newest
    metadata file (state/<operator>/_metadata/v2/<batch>, written by transformWithState): read
    here, or by `spark`'s server where the checkpoint is the server's (config.on_server)."""
    found = []
    for batches in _operator_metadata(checkpoint, spark).values():
        names: set[str] = set()
        for line in batches[max(batches)].splitlines()[1:]:  # the first line is the format version
            try:
                properties = json.loads(line).get("operatorPropertiesJson")
            except ValueError:
                continue
            names |= {v["name"] for v in declared(properties)}
        found.append(names)
    return found


def _operator_metadata(checkpoint: str, spark: SparkSession | None) -> dict[str, dict[int, str]]:
    """{operator: {batch: its metadata file's text}} of a checkpoint's stateful operators."""
    found: dict[str, dict[int, str]] = {}
    if not on_server(checkpoint):
        for folder in Path(checkpoint, "state").glob("*/_metadata/v2"):
            for file in folder.iterdir():
                if file.name.isdigit():
                    found.setdefault(folder.parent.parent.name, {})[int(file.name)] = file.read_text()
        return found
    from pyspark.errors import AnalysisException
    try:
        rows = (spark.read.text(f"{checkpoint.rstrip('/')}/state/*/_metadata/v2/*", wholetext=True)
                .select("value", "_metadata.file_path").collect())
    except AnalysisException:  # no such files: a checkpoint without state yet
        return found
    for value, path in rows:
        *_, operator, _meta, _v2, batch = path.split("/")
        if batch.isdigit():
            found.setdefault(operator, {})[int(batch)] = value
    return found


def state_variables(checkpoint: str, spark: SparkSession | None = None) -> set[str]:
    """The state variables a checkpoint's stateful operators hold, all operators together."""
    return set().union(*operator_state(checkpoint, spark))


def check_state_layout(job: Job, checkpoint: str, solution: ModuleType | None = None,
                       spark: SparkSession | None = None) -> None:
    """Refuse a checkpoint that holds state the processors no longer read: Spark would restart it
    without a word, ignoring every key's old state. Retired are the names in the solution module's
    RETIRED_STATE, and those of a stage the job gives (the RETIRED_STATE of its class's module: a
    state name the stage still declares -> its earlier ones), looked for only in the operator
    declaring that name: a candidate's stage may well call its own state by one of them."""
    module = solutions.of(job.SOLUTION, job.PROCESSORS, solution)
    operators = operator_state(checkpoint, spark)
    retired = set(getattr(module, "RETIRED_STATE", ())) & set().union(*operators)
    given = {kept: earlier for s in job.STAGES if isinstance(s.processor, type)
             for kept, earlier in getattr(importlib.import_module(s.processor.__module__), "RETIRED_STATE", {}).items()}
    for kept, earlier in given.items():
        for names in operators:
            if kept in names:
                retired |= set(earlier) & names
    if retired:
        names = ", ".join(f"'{name}'" for name in sorted(retired))
        raise CheckpointError(
            f"the checkpoint {checkpoint} holds state ({names}) of an earlier layout of this job's "
            f"processor, which this version does not read: continuing would ignore every key's stored "
            f"state. Run `joinlab run PATTERN --reset` to start again from the topics "
            f"(or keep the old checkpoint and choose another with --checkpoint DIR).")


def configured(spark: SparkSession, job: Job):
    """`job`'s SPARK_CONF set on the session for the `with` block: a query started in it keeps them
    in its checkpoint."""
    return session_conf(spark, job.SPARK_CONF)


@contextlib.contextmanager
def session_conf(spark: SparkSession, conf: dict[str, str]):
    """`conf` set on the session for the `with` block; the session's own values (or none) after it."""
    saved = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# The lab's own errors (joinlab.*Error) carry a message written for a person; Spark wraps them in a
# Python traceback and a JVM stack. The message ends where Spark's own text starts again.
_LAB_ERROR = re.compile(r"joinlab\.[\w.]*\.(\w+Error): (.*?)(?=\n\s*SQLSTATE|\n\tat |\n=== |\Z)", re.S)


# Spark's Kafka source stops a query (failOnDataLoss=true) when offsets its checkpoint counts on are
# gone: aged out by retention, or the topic deleted (and perhaps created again). Its message gives
# the reason after "Reason:"; its first sentence names the partition and the offsets.
_DATA_LOSS = re.compile(r"Some data may have been lost because they are not available in Kafka any more;"
                        r".*?Reason:\s*(.*?)\.(?=\s|$)", re.S)


# A client whose server went away (stopped, killed, restarted) gets gRPC's words for it.
_SERVER_GONE = re.compile(r"StatusCode\.UNAVAILABLE|failed to connect to all addresses|Socket closed|Connection refused")


def failure(exc: BaseException) -> str:
    """What a failed query says to a person: the lab's own error message where there is one (a
    bad checkpoint), one line for a Kafka data loss, a server gone, or Kafka refusing the job's
    clients (credentials, certificate, ACLs: joinlab.kafka_settings.spark_failure), else the first
    lines of Spark's, with no secret of the Kafka settings in them."""
    if _SERVER_GONE.search(str(exc)):
        return ("ServerGone: the lab's Spark Connect server stopped answering (it was stopped, killed or restarted), "
                "and the job's query ended with it. Start it again (`make up`; `make ps` shows it), then run "
                "`joinlab run PATTERN` again: the job resumes from its checkpoint.")
    loss = _DATA_LOSS.search(str(exc))
    if loss:
        reason = " ".join(loss.group(1).split())
        return (f"DataLossError: records the checkpoint counts on are gone from Kafka ({reason}): they aged "
                f"out, or the topic was deleted or recreated, so continuing would skip records. Run "
                f"`joinlab run PATTERN --reset` to start again from what the topics hold now, or "
                f"--fail-on-data-loss false to carry on without the lost records.")
    if kafka := kafka_settings.spark_failure(str(exc)):  # Kafka refused the job's clients, or never answered
        return f"KafkaError: {kafka}"
    found = _LAB_ERROR.findall(str(exc))
    if found:
        kind, text = found[-1]
        return f"{kind}: {text.strip()}"
    lines = [line for line in str(exc).splitlines() if line.strip() and not line.startswith("\tat ")]
    return kafka_settings.redact("\n".join(lines[:12]))


def stop_between_batches(query: StreamingQuery, timeout_s: float = 10.0) -> None:
    """Stop `query` at a moment when no batch runs, waiting at most `timeout_s` for one: a stop in
    the middle of a batch cancels its tasks, Spark logs each cancelled write's abort with a stack,
    and the batch runs again on the next start. A query running behind its trigger has no such
    moment: it is stopped after the wait, mid-batch."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.02)
    query.stop()


@contextlib.contextmanager
def services(job: Job, bootstrap: str):
    """The lookup service `job` asks (its LOOKUP), for as long as the `with` block runs: the one
    $LAB_LOOKUP_URL names (the lab stacks set it), else one started here on a free port, reading
    `bootstrap`'s LOOKUP topic (this participant's: joinlab.topics.own). Nothing for a job that asks none."""
    if job.LOOKUP is None or os.environ.get("LAB_LOOKUP_URL"):
        yield None
        return
    from joinlab.lookup import LookupService
    with LookupService(bootstrap, topic=own(job.LOOKUP.schema.topic), port=0) as service:
        saved = {name: os.environ.get(name) for name in ("LAB_LOOKUP_URL", "LAB_LOOKUP_TOKEN")}
        os.environ.update(LAB_LOOKUP_URL=service.url, LAB_LOOKUP_TOKEN=service.token)
        try:
            yield service
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
