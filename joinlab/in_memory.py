"""What every pattern's in-memory pipeline shares. A pattern's `InMemory` (in its job module) chains
its stages as its query does, through pyspark's TwsTester, with no Spark session and no broker; the
unit tests and the interview grader drive a solution module's processors through it.

Spark makes a new processor object for every task (each micro-batch's, after a restart, on another
executor); one TwsTester keeps one object, and `restart` gives the stages what Spark gives them.
"""
from __future__ import annotations

from typing import Callable

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

NEVER_LATE = 2 ** 62  # a first stage's input has no watermark column, so Spark filters nothing there


class Pipeline:
    """A pattern's stages in memory: `rows` makes input records the rows its first stage gets,
    `batch` runs one micro-batch, and `views` reads the output as the job's `actual` reads the
    output topic (the last view per key). Event-time pipelines model Spark's watermark (`EventTime`)."""

    def run(self, batches: list[list[Row]]) -> list:
        """Every batch, then the no-data batch Spark runs to fire what the final watermark made due."""
        return [out for rows in [*batches, []] for out in self.batch(rows)]


class Tester(TwsTester):
    """A TwsTester over `make()`, which `restart` can replace with a new object over the same state."""

    def __init__(self, make: Callable[[], object], **options):
        self.make = make
        super().__init__(make(), **options)


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


def out_ms(row) -> int:
    """A chained stage's event time: its input row's out_time, in ms."""
    return int(row.out_time.timestamp() * 1000)


def last_by_version(views: list[dict], key: str, version: Callable[[dict], tuple]) -> dict:
    """key -> the view a consumer keeps: the highest version, the first one among equals (as the
    jobs' `actual` reads the output topic)."""
    kept: dict = {}
    for view in views:
        current = kept.get(view[key])
        if current is None or version(view) > version(current):
            kept[view[key]] = view
    return kept


def advance(tester: TwsTester, watermark: int) -> list[Row]:
    """Move a stage's watermark forward (never back), firing what it makes due."""
    return tester.setWatermark(watermark) if watermark > tester._currentWatermarkMs else []


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
