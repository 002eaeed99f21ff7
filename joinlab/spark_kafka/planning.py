"""Pure offset arithmetic: which [start, end) range each Spark task reads. Deterministic by design,
so a replayed micro-batch plans exactly the same ranges."""
from __future__ import annotations

import math
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

Offsets = dict[str, dict[str, int]]  # {"topic": {"partition": next offset}}, as in the checkpoint


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(start: Offsets, end: Offsets) -> list[OffsetRange]:
    """One task per non-empty topic-partition; a partition missing from `start` is new: from 0."""
    ranges = []
    for topic in sorted(end):
        for part in sorted(end[topic], key=int):
            begin = start.get(topic, {}).get(part, 0)
            if end[topic][part] > begin:
                ranges.append(OffsetRange(topic, int(part), begin, end[topic][part]))
    return ranges


@dataclass(frozen=True)
class ReadTask(InputPartition):
    """The ranges one Spark task reads, one after another."""
    ranges: tuple[OffsetRange, ...]


def plan_tasks(start: Offsets, end: Offsets, task_records: int = 0) -> list[ReadTask]:
    """plan_ranges, packed into tasks: consecutive ranges share a task while together they stay
    under `task_records` records (0: a task per range). A tiny batch is then one task, not one
    per topic-partition; a big range still gets a task of its own. Deterministic, as plan_ranges."""
    tasks: list[list[OffsetRange]] = []
    for rng in plan_ranges(start, end):
        if tasks and sum(r.size for r in tasks[-1]) + rng.size <= task_records:
            tasks[-1].append(rng)
        else:
            tasks.append([rng])
    return [ReadTask(tuple(t)) for t in tasks]


def cap(latest: Offsets, ceiling: Offsets | None) -> Offsets:
    """`latest`, but never past `ceiling` (the Trigger.AvailableNow target)."""
    if ceiling is None:
        return latest
    return {t: {p: min(o, ceiling.get(t, {}).get(p, o)) for p, o in parts.items()}
            for t, parts in latest.items()}


def rate_limit(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """At most ~`max_rows` new offsets, shared between partitions by their backlog (as Spark's
    KafkaSource does: a partition's share rounds down, but a share below one rounds up)."""
    backlog = {(t, p): o - start.get(t, {}).get(p, 0) for t, parts in latest.items() for p, o in parts.items()}
    total = sum(size for size in backlog.values() if size > 0)
    if total <= max_rows:
        return latest
    limited: Offsets = {}
    for (topic, part), size in backlog.items():
        begin = latest[topic][part] - size
        share = max_rows * size / total if size > 0 else 0
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited.setdefault(topic, {})[part] = min(begin + step, latest[topic][part])
    return limited
