"""What Spark prints: the lab's log level and every message it quiets, in one place.

A normal run shows what a person can act on: the job's own lines, errors, and warnings worth
reading. The messages below are warnings a participant can do nothing about; each says why it is
quiet. `LAB_SPARK_LOG_LEVEL` (default WARN) sets the level; at INFO or DEBUG nothing is quieted.

Two kinds of noise, two mechanisms:
- log4j2 events (`QUIET_EVENTS`): a generated log4j2 configuration that the driver and executor
  JVMs start with (`java_options()`); a rule quiets one message of a logger or the whole logger.
- lines that are not log events (`QUIET_LINES`): the JVM launcher's own warning, and the chatter
  the transformWithState driver-side Python worker prints, which Spark copies raw to its stderr.
  `filter_stderr()` passes the JVM's stderr through a filter that drops them.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

LEVEL_VARIABLE = "LAB_SPARK_LOG_LEVEL"
LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
PATTERN = "%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex"  # Spark's own default layout


@dataclass(frozen=True)
class Quiet:
    logger: str
    message: str | None  # a regex on the message; None quiets the whole logger below ERROR
    why: str


_STREAMING = "org.apache.spark.sql.execution.streaming"
_CONNECT_ERRORS = "org.apache.spark.sql.connect.utils.ErrorUtils"
_STATE_SERVER = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"
QUIET_EVENTS = [
    Quiet("org.apache.spark.util.Utils", r".*Service 'SparkUI' could not bind on port.*",
          "another Spark application has the UI port; the lab prints the port this one got"),
    Quiet("org.apache.spark.scheduler.DAGScheduler", r".*Failed to cancel job group .* Cannot find active jobs.*",
          "stopping a query between batches (Ctrl-C): there was nothing left to cancel"),
    Quiet("org.apache.spark.util.SparkStringUtils", r".*Truncated the string representation of a plan.*",
          "a long plan (a chain of stages) is cut in Spark's debug strings only, not in the job"),
    Quiet("org.apache.hadoop.util.NativeCodeLoader", None,
          "no native Hadoop library on a laptop; Spark uses its Java code, which the lab needs"),
    Quiet(f"{_STREAMING}.runtime.ResolveWriteToStream", r".*spark\.sql\.adaptive\.enabled is not supported.*",
          "AQE does not apply to streaming queries; Spark turns it off for them by itself"),
    Quiet(f"{_STREAMING}.runtime.MicroBatchExecution", r".*Disabling AQE.*",
          "the same, for stateful queries"),
    Quiet(f"{_STREAMING}.runtime.MicroBatchExecution", r".*(Query .* terminated with error|Query .* was stopped).*",
          "a failing query's JVM stack: the client that awaits it says why in a line of its own (joinlab.job.failure)"),
    Quiet(f"{_STREAMING}.runtime.ProcessingTimeExecutor", r".*Current batch is falling behind.*",
          "a batch longer than the trigger interval; the status line shows every batch's time"),
    Quiet(f"{_STREAMING}.operators.stateful.transformwithstate.timers.TimerStateImpl", r".*already exists.*",
          "registering a timer that is already registered is a no-op; Spark warns once per timer"),
    Quiet(_STATE_SERVER, r".*No more data to read from the socket.*",
          "the Python worker of a transformWithState stage closed its state connection: it is done"),
    Quiet(_STATE_SERVER, r".*state \S+ doesn't contain a value.*",
          "reading a key's state before it has any is how every new key starts (get() returns None); "
          "Spark warns once per read"),
    Quiet("org.apache.spark.network.server.TransportChannelHandler", r".*Exception in connection from .*",
          "a killed or stopped executor or worker dropped its connection (\"Connection reset\", with a stack); "
          "Spark reports the lost executor in a line of its own"),
    # An executor killed while the driver was talking to it (cleaning up a broadcast, say): the same
    # loss, told again by each layer the broken call passed through, some with a stack.
    Quiet("org.apache.spark.network.client.TransportResponseHandler",
          r".*Still have \d+ requests outstanding when connection from .* is closed.*",
          "a call to the lost executor that will get no answer; the lost executor has a line of its own"),
    Quiet("org.apache.spark.network.client.TransportClient", r".*Failed to send RPC .*",
          "the same call failing to go out (with a stack)"),
    Quiet("org.apache.spark.rpc.netty.NettyRpcEnv", r".*Ignored failure: .*",
          "the same failure, which Spark says it ignores"),
    Quiet("org.apache.spark.storage.BlockManagerMasterEndpoint",
          r".*(No more replicas available for .*|Error trying to remove .* from block manager .*)",
          "the lost executor's cached blocks (broadcast pieces) are gone with it; Spark cleans up the rest"),
    Quiet("org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin", r".*Error in attempt \d+ getting Kafka offsets.*",
          "an end-offset request that Spark's Kafka source retries (with a stack), e.g. for a topic being "
          "recreated; a retry that fails for good stops the query with its own error"),
    # A client that ends its session (joinlab.spark.stop, a finished `joinlab run`) still frees its
    # last executions' results in the background; those calls arrive after the session is closed.
    Quiet(_CONNECT_ERRORS, r".*(SessionHolder not found during error handling for releaseExecute|"
                           r"Spark Connect RPC error during: releaseExecute)\..*",
          "a stopped client's request to free what its session held, after the session (and all it held) "
          "was freed already: nothing is lost; other RPC errors stay in the log, with their stack"),
    Quiet("org.apache.spark.sql.avro.AvroSerializer", r".*(nullable Avro schema|nullable catalyst schema).*",
          "Avro-encoded state (a job's SPARK_CONF): Spark's own state schemas differ in nullability from "
          "their Avro form, every store, every batch; the lab's state values are all nullable"),
]

QUIET_LINES = [
    (re.compile(r"^WARNING: Using incubator modules: "), "Spark starts the JVM with jdk.incubator.vector"),
    (re.compile(r"^(Starting )?Streaming TransformWithStateInPandas Python worker"),
     "Spark's driver-side Python worker for transformWithState prints every step"),
]


def level() -> str:
    """$LAB_SPARK_LOG_LEVEL in upper case (default WARN); an unknown level is an error that lists them."""
    value = os.environ.get(LEVEL_VARIABLE, "WARN").strip().upper() or "WARN"
    if value not in LEVELS:
        raise ValueError(f"{LEVEL_VARIABLE}={value!r}: choose one of {', '.join(LEVELS)}")
    return value


def quieting() -> bool:
    """Whether the quiet rules apply: at WARN and above (INFO and DEBUG show everything)."""
    return LEVELS.index(level()) >= LEVELS.index("WARN")


def log4j2_properties() -> str:
    lines = [f"# Generated by joinlab.logs ({LEVEL_VARIABLE}={level()}); edit that module, not this file.",
             f"rootLogger.level = {level()}",
             "rootLogger.appenderRef.stderr.ref = console",
             "appender.console.type = Console",
             "appender.console.name = console",
             "appender.console.target = SYSTEM_ERR",
             "appender.console.layout.type = PatternLayout",
             f"appender.console.layout.pattern = {PATTERN}",
             # pyspark counts as a shell: Spark then drops console events below WARN unless the logger
             # that first logs (one of org.apache.spark's) has a level of its own
             "logger.spark.name = org.apache.spark",
             f"logger.spark.level = {level()}",
             "logger.jetty.name = org.sparkproject.jetty",
             f"logger.jetty.level = {'WARN' if quieting() else level()}"]
    if quieting():
        by_logger: dict[str, list[Quiet]] = {}
        for rule in QUIET_EVENTS:
            by_logger.setdefault(rule.logger, []).append(rule)
        for i, (logger, rules) in enumerate(by_logger.items()):
            lines += [f"# {rule.why}" for rule in rules] + [f"logger.q{i}.name = {logger}"]
            if any(rule.message is None for rule in rules):
                lines.append(f"logger.q{i}.level = ERROR")
            else:  # a logger takes one filter: its rules' messages as one alternation
                regex = "|".join(f"(?:{rule.message})" for rule in rules)
                regex = regex.replace("\\", "\\\\")  # a backslash starts an escape in a .properties file
                lines += [f"logger.q{i}.filter.m.type = RegexFilter", f"logger.q{i}.filter.m.regex = {regex}",
                          f"logger.q{i}.filter.m.onMatch = DENY", f"logger.q{i}.filter.m.onMismatch = NEUTRAL"]
    return "\n".join(lines) + "\n"


def java_options(directory: Path) -> str:
    """The JVM option for the log4j2 configuration of the current level, written to `directory`
    (atomically: several processes of the lab may start at once)."""
    text = log4j2_properties()
    path = directory / f"log4j2-{level().lower()}.properties"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return f"-Dlog4j2.configurationFile=file:{path}"


def quiet_line(line: str) -> bool:
    return any(pattern.search(line) for pattern, _ in QUIET_LINES)


@contextlib.contextmanager
def filter_stderr():
    """While the block starts a JVM, point file descriptor 2 at a pipe that the JVM (and the Python
    workers it starts) write into for their whole life; a thread passes on every line but
    `QUIET_LINES` (and the empty line the Python worker prints after each). Only while quieting."""
    if not quieting():
        yield
        return
    read_end, write_end = os.pipe()
    real = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(target=_pass_on, args=(read_end, os.dup(real)), name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        os.dup2(real, 2)
        os.close(real)


def _pass_on(read_end: int, out: int) -> None:
    dropped = False
    with os.fdopen(read_end, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace")
            dropped = quiet_line(line) or (dropped and not line.strip())
            if not dropped:
                os.write(out, raw)
