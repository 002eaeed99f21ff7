"""The offset ranges the steps read: every step reads exactly the records between these offsets,
so that their rates compare the same events."""
from __future__ import annotations

import json
from typing import Callable

from joinlab.topics import end_offsets, partitions_of, plain_consumer

# Ranges to read: (topic, partition) -> (first offset, true end offset).
Ranges = dict[tuple[str, int], tuple[int, int]]


def read_ranges(bootstrap: str, topics: list[str]) -> Ranges:
    """First and true end offset of every partition of `topics` (see joinlab.topics on 'true')."""
    consumer = plain_consumer(bootstrap)
    try:
        tps = partitions_of(consumer, topics)
        beginning = consumer.beginning_offsets(tps)
        ends = end_offsets(consumer, tps)
        return {(tp.topic, tp.partition): (beginning[tp], ends[tp]) for tp in tps}
    finally:
        consumer.close()


def size(ranges: Ranges) -> int:
    return sum(end - begin for begin, end in ranges.values())


def offsets_json(ranges: Ranges, pick: Callable[[int, int], int]) -> str:
    spec: dict[str, dict[str, int]] = {}
    for (topic, part), (begin, end) in ranges.items():
        spec.setdefault(topic, {})[str(part)] = pick(begin, end)
    return json.dumps(spec)
