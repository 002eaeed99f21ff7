"""A pattern's keyed transformWithState calls, declared (its in_memory.py's STAGES) so that
joinlab.kit.in_memory.Chain runs them through pyspark's TwsTester, with no Spark session, as the
query in its job.py runs them in Spark (tests/test_queries.py checks the two agree).

    STAGES = [Stage("gate", "jobs.lottery.solution.LotteryGate", ("entity", "entity_id"), FLOW,
                    event_time=True, emits_time=True),
              Stage("draw", Draw, ("entity", "entity_id"), FLOW, event_time=True, make=lambda c: (c.seed,))]

A stage's processor is a class the pattern gives (`Draw`), or the path of the lab's own answer
(module.Class), which a candidate's solution module replaces by a class of the same name.

Chained stages pass one row shape on (`Flow`): the pattern declares it once as a DDL string, and
each stage emits rows of it. A row is keyed by (entity, id): the stage it goes to groups by both
columns, and rows a stage does not own go through it unchanged. Emitted rows carry emitted_at =
the watermark they were emitted at + 1 ms: the chained operators' event-time column, which must
never be behind the watermark (the event's own time stays in t_us).

    FLOW = "entity string, entity_id bigint, kind string, emitted_at timestamp, ..."
    flow = Flow(FLOW, ("entity", "entity_id"))
    flow("event", "user", 7, watermark_ms, event_id="e1", t_us=...)
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import datetime, timezone
from types import ModuleType
from typing import Any, Callable

from pyspark.sql import Row


@dataclass(frozen=True)
class Stage:
    name: str                 # how tests and tools refer to it (the in-memory chain's attribute)
    processor: str | type     # "module.Class" of the lab's answer (a solution module replaces it), or a given class
    key: tuple[str, ...]      # its grouping columns
    output: str               # the DDL of the rows it emits
    event_time: bool = False  # timeMode EventTime: its timers fire as the watermark passes them
    emits_time: bool = False  # its rows' emitted_at column is the next operator's event time (eventTimeColumnName)
    initial: bool = False     # it takes the query's initial state
    make: Callable[[Any], tuple] = lambda settings: ()  # the processor's arguments, from the job's settings

    def processor_of(self, solution: ModuleType | None, settings: Any):
        """A new processor object, with its arguments: the given class, or the class of that name in
        `solution` (a candidate's module), or with None in the module the path names (the lab's)."""
        if isinstance(self.processor, type):
            return self.processor(*self.make(settings))
        module, _, name = self.processor.rpartition(".")
        return getattr(solution or importlib.import_module(module), name)(*self.make(settings))


def processors(stages: list[Stage]) -> tuple[str, ...]:
    """The classes a solution module must define: the stages' processors named by a path."""
    return tuple(s.processor.rpartition(".")[2] for s in stages if isinstance(s.processor, str))


class Flow:
    """Rows of the shape `ddl` ('name type, ...'), keyed by the columns `key` names (entity, id)."""

    def __init__(self, ddl: str, key: tuple[str, str]):
        self.fields = [part.split(" ", 1)[0] for part in ddl.split(", ")]
        self._entity, self._id = key

    def __call__(self, kind: str, entity: str, entity_id, watermark_ms: int, **fields) -> Row:
        values = dict.fromkeys(self.fields)
        values.update({self._entity: entity, self._id: entity_id}, kind=kind,
                      emitted_at=datetime.fromtimestamp((max(watermark_ms, 0) + 1) / 1000, timezone.utc), **fields)
        return Row(**values)
