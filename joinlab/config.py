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
    ($LAB_MAX_EVENT_SKEW, default '1 hour'); beyond it the event is dead-lettered (joinlab.events)."""
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
