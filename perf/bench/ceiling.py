"""The ceiling of a pattern's wiring: its own job with processors that do nothing in place of its own.

The job keeps everything but the processors' work: the read, the parse and the dead letters, the
keying, the shuffle, every transformWithState stage's tasks (a Python worker per partition, the
grouping key set for every key, each stage's state stores committed) and the sink. A processor
here reads every row of its key and keeps no state and emits nothing. So a batch of this job is
the least any processor can cost in this wiring: the per-batch floor and the steady rate it
measures are the best a pattern's own processors can reach on the same machine. A stage after the
first gets no rows, so for the patterns with several stages it is a bound above, not an estimate.
"""
from __future__ import annotations

from types import ModuleType
from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle


class Nothing(StatefulProcessor):
    """Reads every row of its key; keeps no state; emits nothing. Takes any constructor arguments
    (a stage's settings), as the processor it stands in for does."""

    def __init__(self, *args, **kwargs):
        pass

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        for _ in rows:
            pass
        return iter(())

    def close(self) -> None:
        pass


def solution(job: ModuleType) -> ModuleType:
    """A solution module for `job` (joinlab.kit.solutions) whose every processor is Nothing."""
    module = ModuleType(f"{job.__name__}_nothing")
    for name in job.PROCESSORS:
        setattr(module, name, Nothing)
    return module
