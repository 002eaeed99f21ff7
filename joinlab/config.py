"""Settings, all from environment variables, so the same code runs in make, CI, notebooks and Docker."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path


def lab_home() -> Path:
    """Where the lab keeps local state (broker pid and log, checkpoints): $LAB_HOME or ./.lab."""
    path = Path(os.environ.get("LAB_HOME", ".lab")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def checkpoints() -> str:
    """Where jobs keep their checkpoints, a folder per pattern: $LAB_CHECKPOINTS, else
    $LAB_HOME/checkpoints. For a Spark server elsewhere, a URI (docs/operations.md#your-own-spark)."""
    return os.environ.get("LAB_CHECKPOINTS") or str(lab_home() / "checkpoints")


def on_server(checkpoint: str) -> bool:
    """Whether a checkpoint is named by a URI (file:///srv/..., s3a://bucket/..., hdfs://...): a place
    on the Spark server's side, which the client never reads or writes itself (its server does). A
    plain path is on this machine, which the lab's own server shares."""
    return "://" in checkpoint


def checkpoint_of(pattern: str, given: str | None = None) -> str:
    """A pattern's checkpoint: `given` (--checkpoint), else its folder under checkpoints()."""
    return given or f"{checkpoints().rstrip('/')}/{pattern}"


# A participant's name, as the room's hub gives it ($LAB_PARTICIPANT): it goes into topic and query
# names and, in a room, a Unix user's (`lab-NAME`, at most 32 characters), so it is held to what is
# safe in all three (Kafka allows [a-zA-Z0-9._-] in a topic's name). The hub's login refuses others.
PARTICIPANT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,23}")
PARTICIPANT_RULE = "a-z, 0-9 and '-' only, starting with a letter or digit, at most 24 characters"


class ParticipantError(ValueError):
    """$LAB_PARTICIPANT is not a name the lab can put in topic and query names."""


def participant() -> str:
    """Whose lab this is, in a room where many share one broker and one Spark server
    ($LAB_PARTICIPANT, which the room sets with a LAB_HOME of the participant's own); '' when unset:
    a lab of one. Every name a participant's work leaves on the shared broker and server carries it
    (topic_prefix, query_name), so two participants running the same pattern never meet."""
    name = os.environ.get("LAB_PARTICIPANT", "")
    if name and not PARTICIPANT_NAME.fullmatch(name):
        raise ParticipantError(
            f"LAB_PARTICIPANT={name!r} is not a participant's name: use {PARTICIPANT_RULE} (e.g. alice or team-7)")
    return name


def topic_prefix() -> str:
    """What goes before each of a pattern's topic names on the broker: 'alice.' for participant
    alice ('alice.tweets'), '' without one. joinlab.topics.own names a topic with it."""
    name = participant()
    return f"{name}." if name else ""


def query_name(name: str) -> str:
    """A streaming query's name as the shared server shows it: 'alice.tweet_views' for participant
    alice (Spark takes a '.' in the name of a query with a Kafka sink), `name` itself without one."""
    return topic_prefix() + name


def participant_max_offsets() -> int:
    """At most this many input records in one micro-batch of a participant's query
    ($LAB_ROOM_MAX_OFFSETS_PER_TRIGGER, default 2000): the room's queries share one Spark server's
    cores, and one participant's backlog read in a single batch would hold everyone's batches up
    (docs/room.md#sharing-fairly). A lab of one has no such cap."""
    return int(os.environ.get("LAB_ROOM_MAX_OFFSETS_PER_TRIGGER", "2000"))


def java() -> Path | None:
    """The java the lab's JVMs run, as Spark's launcher finds it: $JAVA_HOME/bin/java, else the one on
    PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home, "bin", "java")) if home else shutil.which("java")
    return Path(found) if found and Path(found).exists() else None


def spark_home() -> str:
    """The Spark installation the lab's JVMs run: PySpark's, found as PySpark itself finds it."""
    from pyspark.find_spark_home import _find_spark_home
    return _find_spark_home()


def jvm_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) for a JVM of the lab: at most $MALLOC_ARENA_MAX (default 2)
    glibc malloc arenas. A JVM's native allocations (its JIT compilers, RocksDB, Netty, threads)
    otherwise spread over up to 8 arenas per core, each keeping the memory it once held
    (docs/operations.md#memory); Hadoop's YARN sets the same variable for its containers."""
    env = dict(os.environ if env is None else env)
    env.setdefault("MALLOC_ARENA_MAX", malloc_arenas())
    return env


def malloc_arenas() -> str:
    """The glibc malloc arenas a JVM of the lab gets: $MALLOC_ARENA_MAX, default 2 (jvm_env)."""
    return os.environ.get("MALLOC_ARENA_MAX", "2")


def python_idle_timeout_s() -> int:
    """Seconds a Python worker may neither read nor write its task's data before Spark kills it and
    tries the task again ($LAB_PYTHON_IDLE_TIMEOUT, default 120; joinlab.spark.python_worker_conf)."""
    return int(os.environ.get("LAB_PYTHON_IDLE_TIMEOUT", "120"))


def topic_partitions() -> int:
    """Partitions for the topics the lab creates ($LAB_TOPIC_PARTITIONS, default 3)."""
    return int(os.environ.get("LAB_TOPIC_PARTITIONS", "3"))


def shuffle_partitions() -> int:
    """Shuffle (and state store) partitions: $LAB_SHUFFLE_PARTITIONS, else one per core of this
    machine (2 to 8). More partitions than cores only add tasks and state stores to commit per
    batch. A query keeps the number its checkpoint was started with (Spark restores it)."""
    configured = os.environ.get("LAB_SHUFFLE_PARTITIONS")
    return int(configured) if configured else max(2, min(8, os.cpu_count() or 2))


def max_event_skew() -> str:
    """How far an event's time may lie past the moment its record was produced
    ($LAB_MAX_EVENT_SKEW, default '1 hour'); beyond it the event is dead-lettered (joinlab.kit.events)."""
    return os.environ.get("LAB_MAX_EVENT_SKEW", "1 hour")


_UNITS_MS = {"ms": 1, "millisecond": 1, "s": 1000, "sec": 1000, "second": 1000, "min": 60_000, "minute": 60_000,
             "h": 3_600_000, "hour": 3_600_000, "d": 86_400_000, "day": 86_400_000}


def duration_ms(text: str, name: str = "duration") -> int:
    """'10 seconds', '500 ms', '1 minute' -> milliseconds; `name` (the setting) goes in the error."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]+)\s*", text.lower())
    unit = match.group(2) if match else ""
    unit = unit if unit in _UNITS_MS else unit.removesuffix("s")  # plural
    if unit not in _UNITS_MS:
        raise ValueError(f"{name}={text!r}: give a whole number and a unit, e.g. '10 seconds'")
    return int(match.group(1)) * _UNITS_MS[unit]
