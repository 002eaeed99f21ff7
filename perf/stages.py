"""Where a batch's time goes: tweet views cut after each stage, and each job beside its stage alone.

    .venv/bin/python -m perf.stages [--tiny-events 1000] [--steady-events 60000] [--pattern P ...]

1. Tweet views' plan cut after each stage (source, + parse and dead letters, + Kafka sink,
   + transformWithState), tiny batches (100 a trigger), all reading the same topics: each stage's
   cost is a difference measured in one run, with Spark's `durationMs` phases and the state
   operator's own timers.
2. Each pattern's whole job (Kafka in, Kafka out) beside its stage alone: the job's own build() on
   the same records read from Parquet files, one file a trigger, to a noop sink. Steady batches
   (20,000 a trigger): what reading and writing Kafka costs the job.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from types import ModuleType
from typing import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from joinlab import patterns
from perf.bench.batches import PHASES, BatchStats, run_batches, run_job
from perf.bench.table import STEADY_PER_TRIGGER, TINY_PER_TRIGGER
from joinlab.generate import send
from joinlab.runner import configured, services
from perf.common import lab, log, send_events


def _noop(df: DataFrame, checkpoint: Path):
    return df.writeStream.format("noop").option("checkpointLocation", str(checkpoint))


def stage_pipelines(job: ModuleType) -> dict[str, Callable[[DataFrame], tuple[DataFrame, bool]]]:
    """name -> raw -> (frame, to_kafka): tweet views' plan cut after each stage. Every pipeline reads
    the same topics with the same limit, so the differences between their batch times are the
    stages' costs (parse includes the second scan of the source, for the dead letters)."""
    from joinlab.kit.events import parse_events

    def parsed(raw):
        return parse_events(raw, [job.USERS, job.TWEETS], job.DEAD_LETTERS_TOPIC, job="tweet-views")

    def parse(raw):
        p = parsed(raw)
        return p.events.select(F.lit("x").alias("topic"), F.lit(None).cast("string").alias("key"),
                               F.to_json(F.struct("*")).alias("value")).unionByName(p.dead_letters), False

    def parse_sink(raw):
        p = parsed(raw)
        return p.events.select(F.lit(job.VIEWS_TOPIC).alias("topic"), F.col("user_id").cast("string").alias("key"),
                               F.to_json(F.struct("*")).alias("value")).unionByName(p.dead_letters), True

    return {"source -> noop": lambda raw: (raw, False),
            "source -> parse -> noop": parse,
            "source -> parse -> Kafka sink (no state)": parse_sink,
            "source -> build (parse, shuffle, transformWithState) -> noop": lambda raw: (job.build(raw), False)}


def run_pipeline(spark, job: ModuleType, frame_of: Callable, bootstrap: str, checkpoint: Path, label: str,
                 timeout_s: float) -> BatchStats:
    from joinlab.kit.kafka import Kafka, read

    def start():
        kafka = Kafka(bootstrap, str(checkpoint), max_offsets_per_trigger=TINY_PER_TRIGGER)
        frame, to_kafka = frame_of(read(spark, kafka, job.INPUT_TOPICS))
        writer = frame.writeStream.format("kafka").options(**kafka.sink()) if to_kafka else _noop(frame, checkpoint)
        with configured(spark, job):
            return writer.outputMode("append").trigger(availableNow=True).start()
    return run_batches(label, start, timeout_s)


def run_stage_alone(spark, job: ModuleType, bootstrap: str, work: Path, label: str, timeout_s: float) -> BatchStats:
    """The job's own build() on the records its topics hold now, read from Parquet files of
    STEADY_PER_TRIGGER records each (one file per trigger, in arrival order), to a noop sink."""
    import pyarrow.parquet as pq
    from tests.spark_rows import KAFKA_COLUMNS
    records = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", ",".join(job.INPUT_TOPICS)).load()  # earliest to latest: what is there now
               .select(*KAFKA_COLUMNS.fieldNames()).orderBy("timestamp", "topic", "partition", "offset").toArrow())
    files = work / "files"
    files.mkdir(parents=True, exist_ok=True)
    sizes = []
    for n, start in enumerate(range(0, records.num_rows, STEADY_PER_TRIGGER)):
        path = files / f"part-{n:05d}.parquet"
        pq.write_table(records.slice(start, STEADY_PER_TRIGGER), path)
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source reads files in modification order
        sizes.append(min(STEADY_PER_TRIGGER, records.num_rows - start))
    raw = spark.readStream.schema(KAFKA_COLUMNS).option("maxFilesPerTrigger", 1).parquet(str(files))

    def start():
        with configured(spark, job):
            return _noop(job.build(raw), work / "checkpoint").outputMode("append").trigger(availableNow=True).start()

    stats = run_batches(label, start, timeout_s)
    stats.rows = sizes[1:len(stats.batch_ms) + 1]  # a file source's offsets count files, not records
    return stats


def _n(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _line(label: str, s: BatchStats) -> str:
    return (f"  {label:<46} {_n(s.median_ms):>6} " + " ".join(f"{_n(s.phases.get(p)):>13}" for p in PHASES)
            + f" {_n(s.state.get('allUpdatesTimeMs')):>12} {_n(s.state.get('commitTimeMs')):>12}")


def format_stages(stages: dict[str, BatchStats]) -> str:
    by = {label: s.median_ms for label, s in stages.items()}

    def minus(a, b):
        return None if by.get(a) is None or by.get(b) is None else by[a] - by[b]
    diffs = [("source (read tasks, Kafka fetch)", by.get("source -> noop")),
             ("+ parse and dead letters (2nd scan)", minus("source -> parse -> noop", "source -> noop")),
             ("+ Kafka sink", minus("source -> parse -> Kafka sink (no state)", "source -> parse -> noop")),
             ("+ shuffle, transformWithState", minus("source -> build (parse, shuffle, transformWithState) -> noop",
                                                  "source -> parse -> noop"))]
    return "\n".join([f"Where a tiny batch's time goes (tweet views, {TINY_PER_TRIGGER} records per trigger; median ms; "
                      "phases are Spark's durationMs, state = the transformWithState operator's own timers)",
                      f"  {'pipeline':<46} {'batch':>6} " + " ".join(f"{p:>13}" for p in PHASES)
                      + f" {'state update':>12} {'state commit':>12}",
                      *(_line(label, s) for label, s in stages.items()), "",
                      "  differences (ms): " + "; ".join(f"{label} {_n(v)}" for label, v in diffs)])


def format_alone(alone: dict[str, tuple[BatchStats, BatchStats]]) -> str:
    lines = [f"The whole job against its stage alone (steady, {STEADY_PER_TRIGGER:,} per trigger; stage alone = the "
             f"job's build() on the same events read from files, to a noop sink)",
             f"  {'pattern':<18} {'whole job ev/s':>14} {'stage alone ev/s':>16} {'whole / alone':>13}"]
    for pattern, (whole, stage) in alone.items():
        share = f"{100 * whole.rate / stage.rate:.0f}%" if whole.rate and stage.rate else "-"
        lines.append(f"  {pattern:<18} {_n(whole.rate):>14} {_n(stage.rate):>16} {share:>13}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.stages", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tiny-events", type=int, default=1000)
    parser.add_argument("--steady-events", type=int, default=60000, help="0: part 1 only")
    parser.add_argument("--pattern", choices=list(patterns.PATTERNS), action="append",
                        help="part 2 for this pattern (repeat; default: all)")
    args = parser.parse_args(argv)
    timeout_s = 300 + (args.tiny_events + args.steady_events) / 50
    chosen = args.pattern or list(patterns.PATTERNS)
    with lab("stages") as (spark, bootstrap, work):
        rest = {p: send_events(bootstrap, p, args.seed, args.tiny_events, args.steady_events)
                for p in {"tweet-views", *chosen}}
        tweet_views = patterns.job("tweet-views")
        stages = {label: run_pipeline(spark, tweet_views, frame_of, bootstrap, work / f"stage-{n}", label, timeout_s)
                  for n, (label, frame_of) in enumerate(stage_pipelines(tweet_views).items())}
        stages["whole job, as `joinlab run` starts it"] = run_job(spark, tweet_views, bootstrap, work / "whole-tiny",
                                                                  TINY_PER_TRIGGER, "whole job", timeout_s)
        alone = {}
        if args.steady_events:
            for pattern in chosen:
                send(bootstrap, rest[pattern], progress=False)
                job = patterns.job(pattern)
                log(f"{pattern}: whole job, then its stage alone ({STEADY_PER_TRIGGER:,} per trigger)")
                with services(job, bootstrap):
                    whole = run_job(spark, job, bootstrap, work / f"{pattern}-whole", STEADY_PER_TRIGGER,
                                    f"{pattern}, whole job", timeout_s)
                alone[pattern] = whole, run_stage_alone(spark, job, bootstrap, work / f"{pattern}-alone",
                                                        f"{pattern}, stage alone", timeout_s)
    print(format_stages(stages))
    if alone:
        print()
        print(format_alone(alone))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
