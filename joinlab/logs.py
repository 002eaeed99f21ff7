"""What Spark prints: the lab's log level, and the messages it quiets.

A normal run shows what a person can act on: the job's own lines, errors, and warnings worth
reading. The messages the lab quiets are warnings a participant can do nothing about; each rule
says why it is quiet. `LAB_SPARK_LOG_LEVEL` (default WARN) sets the level; at INFO or DEBUG nothing
is quieted (whoever asks for Spark's INFO lines is looking into Spark, and wants its warnings too).

Two kinds of noise, two mechanisms:
- log4j2 events: the lab's log4j2 configuration (CONFIGURATION, a file of this package), which the
  driver and executor JVMs of a server start with (`java_options()`); a rule there denies messages
  of one logger.
- lines that are not log events (`QUIET_LINES`): the JVM launcher's own warning, and the chatter
  the transformWithState driver-side Python worker prints, which Spark copies raw to its stderr.
  `filter_stderr()` passes the JVM's stderr through a filter that drops them.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
from pathlib import Path

LEVEL_VARIABLE = "LAB_SPARK_LOG_LEVEL"
LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
CONFIGURATION = Path(__file__).with_name("log4j2.properties")

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


def java_options() -> str:
    """The JVM options that start a JVM with the lab's log4j2 file at the current level: its rules
    deny their messages while quieting, and let them through (NEUTRAL) at INFO or DEBUG."""
    return (f"-Dlog4j2.configurationFile=file:{CONFIGURATION} -Djoinlab.log.level={level()} "
            f"-Djoinlab.log.quiet={'DENY' if quieting() else 'NEUTRAL'}")


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
