"""A pattern's job run over its topics in micro-batches of a fixed size, and what its batches took.

Two shapes of batch, as a user meets them: tiny batches (a few records per trigger, what a
notebook or a live demo sees: the per-batch floor) and big ones (the steady rate). The first
batch of every query is start-up (planning, state store creation, Python workers) and is reported
apart, never mixed into the median or the rate.

Every step has a deadline and fails with a message that says what did not finish, never hangs.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from joinlab.status import as_dict, offset_spans

# The parts of durationMs that a micro-batch spends in sequence (Spark's MicroBatchExecution):
# planning the offsets, writing them to the WAL, running the batch (read, parse, state, sink:
# all inside addBatch), and committing.
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


class BenchError(RuntimeError):
    """A step failed or missed its deadline; the message says which and what to try."""


class Deadline:
    """A wall-clock budget for one step: `check()` raises BenchError once it is spent."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds

    def check(self, detail: str = "") -> None:
        if time.monotonic() > self.end:
            raise BenchError(f"{self.what} did not finish within {self.seconds:.0f} s"
                             + (f" ({detail})" if detail else ""))


def log(message: str) -> None:
    """Progress goes to stderr, so that stdout holds the tables only."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


@dataclass
class BatchStats:
    """The batches of one query run: start-up (its first batch) apart from the rest."""
    label: str
    first_ms: float
    batch_ms: list[float]
    rows: list[int]
    phases: dict[str, float] = field(default_factory=dict)  # median ms per phase, first batch excluded
    state: dict[str, float] = field(default_factory=dict)  # median ms per stateful-operator timer
    wall_s: float = 0.0

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.batch_ms) if self.batch_ms else None

    @property
    def rate(self) -> float | None:
        """Records per second over the batches after the first (start-up excluded)."""
        seconds = sum(self.batch_ms) / 1000
        return sum(self.rows) / seconds if seconds else None


def stats_of(label: str, progress: list[dict], wall_s: float) -> BatchStats:
    batches = [p for p in map(as_dict, progress) if p.get("numInputRows")]
    if len(batches) < 2:
        raise BenchError(f"{label}: {len(batches)} batch(es) with input; need at least 2 (one is start-up)")
    rest = batches[1:]
    phases = {name: statistics.median(p["durationMs"].get(name, 0) for p in rest) for name in PHASES}
    state: dict[str, float] = {}
    for timer in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
        state[timer] = statistics.median(sum(op.get(timer, 0) for op in p.get("stateOperators", [])) for p in rest)
    return BatchStats(label, batches[0]["durationMs"]["triggerExecution"],
                      [p["durationMs"]["triggerExecution"] for p in rest], [records_read(p) for p in rest],
                      phases, state, wall_s)


def records_read(progress: dict) -> int:
    """Input records of a batch: its sources' end minus start offsets. Not numInputRows: Spark counts
    a source once per scan, and every pattern scans its input twice (events and dead letters), so
    numInputRows is twice the records read."""
    return sum(sum(offset_spans(source).values()) for source in progress.get("sources", []))


def run_batches(label: str, start: Callable[[], object], timeout_s: float) -> BatchStats:
    """Start an availableNow query (`start()` returns it), wait for it to end, and read its batches.
    A query that failed because a Python worker did not connect back in time (a machine too busy
    to start a process within Spark's timeout) is started once more, from its checkpoint."""
    for attempt in (1, 2):
        began = time.monotonic()
        query = start()
        try:
            finished = query.awaitTermination(timeout_s)
        except Exception:  # it failed: query.exception() says why
            finished = True
        if not finished:
            query.stop()
            raise BenchError(f"{label}: the streaming query did not finish within {timeout_s:.0f} s")
        if query.exception() is None:
            stats = stats_of(label, query.recentProgress, time.monotonic() - began)
            log(f"  {label}: start-up {stats.first_ms:,.0f} ms, then median {stats.median_ms:,.0f} ms per batch "
                f"({len(stats.batch_ms)} batches)")
            return stats
        if attempt == 1 and "failed to connect back" in str(query.exception()):
            log(f"  {label}: a Python worker did not connect back in time (busy machine); starting it again")
            continue
        raise BenchError(f"{label}: the query failed: {query.exception()}")
    raise AssertionError("unreachable")


def run_job(spark, job: ModuleType, bootstrap: str, checkpoint: Path, per_trigger: int, label: str,
            timeout_s: float, solution: ModuleType | None = None) -> BatchStats:
    """The whole job as `joinlab run` starts it (with the processors of `solution`; None: the lab's),
    `per_trigger` records per batch, availableNow, from the beginning of its topics."""
    from joinlab.runner import start
    return run_batches(label, lambda: start(spark, job, bootstrap, str(checkpoint), available_now=True,
                                            max_offsets_per_trigger=per_trigger, solution=solution), timeout_s)


def fill(bootstrap: str, pattern: str, seed: int, count: int) -> list:
    """Create `pattern`'s topics, which must hold no records (every run reads them from the
    beginning, so older records would change what it measures); return `count` seeded events of
    it, not sent yet."""
    from joinlab import patterns
    from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer
    create_topics(bootstrap, patterns.all_topics(pattern))
    consumer = plain_consumer(bootstrap)
    try:
        held = sum(end_offsets(consumer, partitions_of(consumer, patterns.job(pattern).INPUT_TOPICS)).values())
    finally:
        consumer.close()
    if held:
        raise BenchError(f"{pattern}'s input topics at {bootstrap} already hold {held} records; run on a fresh "
                         "broker (unset KAFKA_BOOTSTRAP_SERVERS, no --bootstrap: the bench starts one)")
    return list(patterns.generator(pattern).generate(seed, count))
