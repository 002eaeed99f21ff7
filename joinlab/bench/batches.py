"""Where a micro-batch's time goes: Spark's own progress (`durationMs`, the stateful operators'
timers) for the whole job, and the same events through shorter pipelines (source only, + parse,
+ sink, + state), so each stage's cost is a difference measured in one run.

Two shapes of batch, as a user meets them: tiny batches (100 records per trigger, what a notebook
or a live demo sees: the per-batch floor) and big ones (20,000 records per trigger: the steady
rate). The first batch of every query is reported apart (start-up: planning, state store
creation, Python workers), never mixed into the median or the rate.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from joinlab.bench.step import BenchError, log
from joinlab.status import offset_spans

# The parts of durationMs that a micro-batch spends in sequence (Spark's MicroBatchExecution):
# planning the offsets, writing them to the WAL, running the batch (read, parse, state, sink:
# all inside addBatch), and committing.
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


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
    batches = [p for p in progress if p.get("numInputRows")]
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
    numInputRows is twice the records read (measured: 194 for 97 records)."""
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
                f"({len(stats.batch_ms)} batches, {stats.rate:,.0f} records/s)")
            return stats
        if attempt == 1 and "failed to connect back" in str(query.exception()):
            log(f"  {label}: a Python worker did not connect back in time (busy machine); starting it again")
            continue
        raise BenchError(f"{label}: the query failed: {query.exception()}")
    raise AssertionError("unreachable")


# --- Pipelines: the job cut after each stage --------------------------------------------------

def _noop(df: DataFrame, checkpoint: Path):
    return df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))


def stage_pipelines(job: ModuleType) -> dict[str, Callable[[DataFrame], tuple[DataFrame, bool]]]:
    """name -> raw -> (frame, to_kafka): the job's plan cut after each stage. Every pipeline reads
    the same topics with the same limit, so the differences between their batch times are the
    stages' costs (parse includes the second scan of the source, for the dead letters)."""
    from joinlab.events import parse_events
    if not hasattr(job, "join_views"):
        raise BenchError(f"{job.__name__} has no stage pipelines (only tweet views is cut into stages)")

    def parsed(raw):
        return parse_events(raw, [job.USERS, job.TWEETS], job.DEAD_LETTERS_TOPIC, job="tweet-views")

    def source(raw):
        return raw, False

    def parse(raw):
        p = parsed(raw)
        return p.events.select(F.lit("x").alias("topic"), F.lit(None).cast("string").alias("key"),
                               F.to_json(F.struct("*")).alias("value")).unionByName(p.dead_letters), False

    def parse_sink(raw):
        p = parsed(raw)
        return p.events.select(F.lit(job.VIEWS_TOPIC).alias("topic"), F.col("user_id").cast("string").alias("key"),
                               F.to_json(F.struct("*")).alias("value")).unionByName(p.dead_letters), True

    def parse_state(raw):
        return job.join_views(parsed(raw).events), False

    def whole(raw):
        return job.build(raw), True

    return {"source -> noop": source, "source -> parse -> noop": parse,
            "source -> parse -> Kafka sink (no state)": parse_sink,
            "source -> parse -> transformWithState -> noop": parse_state,
            "whole job (-> Kafka sink)": whole}


def _start(spark, job: ModuleType, frame_of: Callable, bootstrap: str, checkpoint: Path, per_trigger: int,
           options: dict[str, str], conf: dict[str, str]):
    """An availableNow query of `frame_of(raw)` -> (frame, to_kafka), started under the job's own
    settings and `conf` (restored afterwards), with source/sink `options`."""
    from joinlab.job import configured
    from joinlab.spark import kafka_sink, read_kafka
    raw = read_kafka(spark, bootstrap, job.INPUT_TOPICS, starting="earliest", max_offsets_per_trigger=per_trigger,
                     **options)
    frame, to_kafka = frame_of(raw)
    writer = kafka_sink(frame, bootstrap, str(checkpoint), **options) if to_kafka else _noop(frame, checkpoint)
    saved = {key: spark.conf.get(key, None) for key in conf}
    try:
        for key, value in conf.items():
            spark.conf.set(key, value)
        with configured(spark, job):
            return writer.outputMode("append").trigger(availableNow=True).start()
    finally:
        for key, value in saved.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)


def run_pipeline(spark, job: ModuleType, frame_of: Callable, bootstrap: str, checkpoint: Path, per_trigger: int,
                 label: str, timeout_s: float) -> BatchStats:
    return run_batches(label, lambda: _start(spark, job, frame_of, bootstrap, checkpoint, per_trigger, {}, {}),
                       timeout_s)


def run_job(spark, job: ModuleType, bootstrap: str, checkpoint: Path, per_trigger: int, label: str,
            timeout_s: float, solution: ModuleType | None = None, options: dict[str, str] | None = None,
            conf: dict[str, str] | None = None) -> BatchStats:
    """The whole job, as `joinlab run` builds it, `per_trigger` records per batch, availableNow."""
    return run_batches(label, lambda: _start(spark, job, lambda raw: (job.build(raw, solution), True), bootstrap,
                                             checkpoint, per_trigger, options or {}, conf or {}), timeout_s)


# --- The stage alone: the job's build() on the same records from files, to a noop sink -----------

def run_stage_alone(spark, job: ModuleType, bootstrap: str, work: Path, per_trigger: int, label: str,
                    timeout_s: float) -> BatchStats:
    """The job's own build() (parsing, its transformWithState stages) on the records its topics hold
    now, read from Parquet files of `per_trigger` records each (one file per trigger, in arrival
    order) and written to a noop sink: the job without Kafka, so that the whole job's rate beside
    it shows what reading and writing Kafka costs."""
    import os
    import pyarrow.parquet as pq
    from joinlab.job import configured
    from joinlab.spark import read_kafka_batch
    from tests.spark_rows import KAFKA_COLUMNS
    records = (read_kafka_batch(spark, bootstrap, job.INPUT_TOPICS).select(*KAFKA_COLUMNS.fieldNames())
               .orderBy("timestamp", "topic", "partition", "offset").toArrow())
    files = work / "files"
    files.mkdir(parents=True, exist_ok=True)
    sizes = []
    for n, start in enumerate(range(0, records.num_rows, per_trigger)):
        path = files / f"part-{n:05d}.parquet"
        pq.write_table(records.slice(start, per_trigger), path)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source reads files in modification order
        sizes.append(min(per_trigger, records.num_rows - start))
    raw = spark.readStream.schema(KAFKA_COLUMNS).option("maxFilesPerTrigger", 1).parquet(str(files))

    def start():
        with configured(spark, job):
            return _noop(job.build(raw), work / "checkpoint").outputMode("append").trigger(availableNow=True).start()

    stats = run_batches(label, start, timeout_s)
    stats.rows = sizes[1:len(stats.batch_ms) + 1]  # a file source's offsets count files, not records
    return stats
