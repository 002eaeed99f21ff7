"""A pattern's STAGES (joinlab.kit.stages) through pyspark's TwsTester, one micro-batch at a time, with
no Spark session and no broker: the unit tests and the interview grader drive a solution module's
processors through it. A job's `InMemory` is a `Chain` of its STAGES with two functions of its own:
`rows` (input records as the first stage's rows) and `views` (the output as the job's `actual`
reads it from the output topic: the last view per key).

Spark makes a new processor object for every task (each micro-batch's, after a restart, on another
executor); one TwsTester keeps one object, and `restart` gives the stages what Spark gives them.
"""
from __future__ import annotations

from functools import partial
from types import ModuleType
from typing import Any, Callable

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from joinlab.kit.stages import Stage

NEVER_LATE = 2 ** 62  # TwsTester filters nothing by itself: `step` drops late rows as Spark does


class Tester(TwsTester):
    """A TwsTester over `make()`, which `restart` can replace with a new object over the same state."""

    def __init__(self, make: Callable[[], object], **options):
        self.make = make
        super().__init__(make(), **options)


class Chain:
    """The stages of `stages` as TwsTesters, each an attribute by its stage's name (`p.gate`), fed
    one micro-batch at a time; event-time chains model Spark's watermark (`EventTime`)."""

    def __init__(self, stages: list[Stage], solution: ModuleType | None, settings: Any = None,
                 delay_ms: int | None = None, initial: list[Row] = ()):
        self.stages = stages
        for stage in stages:
            state = [(tuple(getattr(r, c) for c in stage.key), r) for r in initial] if stage.initial else []
            setattr(self, stage.name, Tester(
                partial(stage.processor_of, solution, settings), initialStateRow=state or None,
                timeMode="EventTime" if stage.event_time else "None",
                eventTimeExtractor=(lambda r: NEVER_LATE) if stage.event_time else None))
        self.clock = EventTime(delay_ms) if delay_ms is not None else None

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[Row]:
        """One micro-batch through every stage; an event-time chain's watermark is `watermark`, else
        the newest event time (t_us) of earlier batches - the delay."""
        mark = self.clock.next(watermark) if self.clock else None
        out, before = rows, None
        for stage in self.stages:
            late = emitted_ms if before is not None and before.emits_time else None
            out, before = step(getattr(self, stage.name), stage, out, mark, late), stage
        if self.clock:
            self.clock.done(mark, rows)
        return out

    # key -> the reason of its last dead letter, for a chain whose stages dead-letter keys; None: they never do
    dead_letters: Callable[[list], dict] | None = None

    def run(self, batches: list[list[Row]]) -> list:
        """Every batch, then the no-data batch Spark runs to fire what the final watermark made due."""
        return [out for rows in [*batches, []] for out in self.batch(rows)]


def step(tester: TwsTester, stage: Stage, rows: list[Row], watermark: int | None,
         late: Callable[[Row], int] | None = None) -> list[Row]:
    """One stage's share of a micro-batch, in Spark's order: input rows whose event time (`late`: a
    chained stage's emitted_at) is behind the previous batch's watermark are dropped; the input is
    handled key by key (in the order the keys first came) with the batch's watermark in its
    TimerValues; then the timers due by that watermark fire, those the input just registered too.
    The one place that reaches into TwsTester's private fields: it has no public way to move the
    watermark without firing timers before the input, and its handle refuses a timer the batch's
    watermark already passed (Spark fires it after the input), so the handle's watermark moves last."""
    def key(r):
        values = tuple(getattr(r, c) for c in stage.key)
        return values if len(values) > 1 else values[0]
    if not stage.event_time:
        return feed(tester, rows, key)
    previous = tester._currentWatermarkMs
    if late is not None:
        rows = [r for r in rows if late(r) > previous]
    tester._currentWatermarkMs = max(previous, watermark)
    out = feed(tester, rows, key)
    tester.handle.setWatermark(tester._currentWatermarkMs)
    return out + tester._handleExpiredTimers()


def restart(pipeline) -> None:
    """New processor objects (__init__ and init) for every stage of a pipeline, on the same handles:
    they keep the state variables by name, the timers and the watermark, as a checkpoint does; and
    handleInitialState is not called again, as in Spark."""
    for stage in vars(pipeline).values():
        if isinstance(stage, Tester):
            stage.processor.close()
            stage.processor = stage.make()
            stage.processor.init(stage.handle)


def feed(tester: TwsTester, rows: list[Row], key: Callable) -> list[Row]:
    """One handleInputRows call per grouping key, in the order the keys first came."""
    out = []
    for k in dict.fromkeys(key(r) for r in rows):
        out += tester.test(k, [r for r in rows if key(r) == k])
    return out


def emitted_ms(row) -> int:
    """A chained stage's event time: its input row's emitted_at, in ms."""
    return int(row.emitted_at.timestamp() * 1000)


def last_by_version(views: list[dict], key: str, version: Callable[[dict], tuple]) -> dict:
    """key -> the view a consumer keeps: the highest version, the first one among equals (as the
    jobs' `actual` reads the output topic)."""
    kept: dict = {}
    for view in views:
        current = kept.get(view[key])
        if current is None or version(view) > version(current):
            kept[view[key]] = view
    return kept


class EventTime:
    """The watermark of a chain of event-time stages, micro-batch by micro-batch."""

    def __init__(self, delay_ms: int):
        self.delay_ms, self.watermark, self.newest_ms = delay_ms, 0, None

    def next(self, watermark: int | None) -> int:
        """This batch's watermark: as given, else newest event time of earlier batches - delay."""
        if watermark is None and self.newest_ms is not None:
            watermark = max(self.watermark, self.newest_ms - self.delay_ms)
        return self.watermark if watermark is None else watermark

    def done(self, watermark: int, rows: list[Row]) -> None:
        self.watermark = watermark
        if rows:
            newest = max(r.t_us for r in rows) // 1000
            self.newest_ms = newest if self.newest_ms is None else max(self.newest_ms, newest)
