"""Steps 2 and 3 on one warmed-up Spark session: the Kafka source alone, then the tweet-views job.

Why warm up: JVM start-up, JIT and the Python workers would otherwise land in the first number."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

from jobs.tweet_views import job as tweet_views
from jobs.tweet_views.job import INPUT_TOPICS, OUTPUT_TOPICS, VIEWS_TOPIC
from joinlab.bench.offsets import Ranges, offsets_json, read_ranges
from joinlab.bench.step import BenchError
from joinlab.bench.table import Measurement


# Loggers that would flood stderr during the job steps; quieted only when the level is the default WARN.
NOISY_LOGGERS = [
    # "current batch is falling behind": expected in step 5, where a batch outlasts the trigger
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
]


def start_spark():
    """The lab's session; (spark, stop_at_end): a session that was already running is left alone."""
    from pyspark.sql import SparkSession
    from joinlab.spark import session
    existed = SparkSession.getActiveSession() is not None
    spark = session("joinlab-bench")
    if os.environ.get("LAB_SPARK_LOG_LEVEL", "WARN").upper() == "WARN":
        log4j = spark._jvm.org.apache.logging.log4j
        for name in NOISY_LOGGERS:
            log4j.core.config.Configurator.setLevel(name, log4j.Level.ERROR)
    return spark, not existed


def _with_deadline(spark, fn: Callable, timeout_s: float, what: str):
    """Run a blocking Spark action with a deadline: on timeout its jobs are cancelled."""
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            result["error"] = exc

    worker = threading.Thread(target=run, name=f"bench {what}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        spark.sparkContext.cancelAllJobs()
        worker.join(30)
        raise BenchError(f"{what} did not finish within {timeout_s:.0f} s (its Spark jobs were cancelled)")
    if "error" in result:
        raise result["error"]
    return result["value"]


def _run_to_end(query, timeout_s: float, what: str) -> float:
    """Wait for an availableNow query to terminate; its exception, or a timeout, is raised."""
    if not query.awaitTermination(timeout_s):
        query.stop()
        raise BenchError(f"{what}: the streaming query did not terminate within {timeout_s:.0f} s")
    return time.monotonic()


def warm_up(spark, bootstrap: str, ranges: Ranges, timeout_s: float) -> None:
    """A tiny SQL job and a tiny Kafka batch read (10 records per partition): JVM start-up, JIT,
    the Kafka format's registration and the Python workers are then not in the measurements."""

    def tiny():
        spark.range(1000).selectExpr("sum(id)").collect()
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", ",".join(INPUT_TOPICS))
                .option("startingOffsets", offsets_json(ranges, lambda b, e: b))
                .option("endingOffsets", offsets_json(ranges, lambda b, e: min(e, b + 10)))
                .load().count())
    _with_deadline(spark, tiny, timeout_s, "Spark warm-up")


# --- Step 2: Spark's Kafka source alone --------------------------------------------------------

def spark_source_stream(spark, bootstrap: str, n: int, checkpoint: Path, timeout_s: float) -> Measurement:
    """readStream over the input topics into the noop sink, availableNow: what reading Kafka costs
    Spark before any parsing or joining. Wall time from start() to termination."""
    from joinlab.spark import read_kafka
    start = time.monotonic()
    query = (read_kafka(spark, bootstrap, INPUT_TOPICS, starting="earliest").writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    end = _run_to_end(query, timeout_s, "step 2 (Spark source, streaming)")
    rows = sum(p.get("numInputRows", 0) for p in query.recentProgress)
    note = f"readStream -> noop, availableNow, {len(query.recentProgress)} batch(es)"
    if rows != n:
        note += f"; WARNING: query reported {rows} input rows"
    return Measurement("2a Spark source: stream (noop)", n, end - start, note)


def spark_source_batch(spark, bootstrap: str, n: int, timeout_s: float) -> Measurement:
    """The same read as a batch DataFrame count: the source without the streaming machinery."""
    from joinlab.spark import read_kafka_batch
    start = time.monotonic()
    rows = _with_deadline(spark, lambda: read_kafka_batch(spark, bootstrap, INPUT_TOPICS).count(),
                          timeout_s, "step 2 (Spark source, batch count)")
    seconds = time.monotonic() - start
    if rows != n:
        raise BenchError(f"step 2: the batch read counted {rows} records, expected {n}")
    return Measurement("2b Spark source: batch count()", rows, seconds, "spark.read ... .load().count()")


# --- Step 3: the tweet-views job ---------------------------------------------------------------

def tweet_views_job(spark, bootstrap: str, n: int, checkpoint: Path, timeout_s: float) -> Measurement:
    """The whole job (parse + dead letters + transformWithState join + Kafka sink) over the same
    events, availableNow, into the real output topic. events/s = input records / wall time."""
    from joinlab.job import start as start_job
    before = read_ranges(bootstrap, OUTPUT_TOPICS)
    start = time.monotonic()
    query = start_job(spark, tweet_views, bootstrap, str(checkpoint), available_now=True, name="bench-tweet-views")
    end = _run_to_end(query, timeout_s, "step 3 (tweet-views job)")
    after = read_ranges(bootstrap, OUTPUT_TOPICS)
    written = {t: sum(after[k][1] - before.get(k, (0, 0))[1] for k in after if k[0] == t) for t in OUTPUT_TOPICS}
    note = (f"availableNow, {len(query.recentProgress)} batch(es); {written[VIEWS_TOPIC]} views, "
            f"{written[tweet_views.DEAD_LETTERS_TOPIC]} dead letters")
    return Measurement("3  tweet-views job (Spark)", n, end - start, note)



# --- Step 3b: the other patterns' jobs, each on its own events ---------------------------------

def pattern_job(spark, pattern: str, bootstrap: str, seed: int, count: int, checkpoint: Path,
                timeout_s: float, row: str = "3b") -> Measurement:
    """Produce `count` seeded events of `pattern` (not timed) to its own topics, then run its job
    availableNow over them, as step 3 does for tweet views. events/s = input records / wall time."""
    from joinlab import patterns
    from joinlab.generate import send
    from joinlab.job import services
    from joinlab.job import start as start_job
    from joinlab.topics import create_topics
    job = patterns.job(pattern)
    create_topics(bootstrap, patterns.all_topics(pattern))
    if any(e > 0 for _, e in read_ranges(bootstrap, job.INPUT_TOPICS).values()):
        raise BenchError(f"step 3 ({pattern}): its input topics already hold records; run on a fresh broker")
    n = send(bootstrap, patterns.generator(pattern).generate(seed, count), progress=False)
    before = read_ranges(bootstrap, job.OUTPUT_TOPICS)
    with services(job, bootstrap):
        start = time.monotonic()
        query = start_job(spark, job, bootstrap, str(checkpoint), available_now=True, name=f"bench-{pattern}")
        end = _run_to_end(query, timeout_s, f"step 3 ({pattern} job)")
    after = read_ranges(bootstrap, job.OUTPUT_TOPICS)
    written = sum(after[k][1] - before.get(k, (0, 0))[1] for k in after)
    note = f"own events, availableNow, {len(query.recentProgress)} batch(es); {written} records out"
    return Measurement(f"{row} {pattern} job (Spark)", n, end - start, note)
