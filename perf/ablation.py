"""The ablation: tweet views with each of the lab's speed settings turned off alone, then all off.

    .venv/bin/python -m perf.ablation [--tiny-events 1000] [--steady-events 60000]

The settings: state per key, not per event (the per-event processor is
tests/tweet_views_per_event.py); RocksDB changelog checkpointing and checkpoint files through
Hadoop's FileSystem API (joinlab.spark); shuffle partitions = cores (joinlab.config). Every variant
reads the same events on one warm session, tiny batches (100 a trigger) and steady ones (20,000 a
trigger; not for the checkpoint files, which cost per batch, not per record).
"""
from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from joinlab import patterns
from joinlab.kit import solutions
from perf.bench.batches import run_job
from perf.bench.table import STEADY_PER_TRIGGER, TINY_PER_TRIGGER
from joinlab.generate import send
from joinlab.runner import session_conf
from joinlab.spark import CHECKPOINT_FILES, STATE_STORE_CONF
from perf.common import lab, log, send_events

PER_EVENT = Path(__file__).resolve().parent.parent / "tests" / "tweet_views_per_event.py"
SPARK_DEFAULT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
(CHANGELOG,) = STATE_STORE_CONF


@dataclass
class Variant:
    name: str
    conf: dict = field(default_factory=dict)  # Spark settings that turn the change off
    per_event: bool = False  # the per-event processor instead of the lab's
    steady: bool = True  # worth a steady run (changes the per-record path), not only a tiny one


CHANGES = [Variant("without: state per key, not per event", per_event=True),
           Variant("without: RocksDB changelog checkpointing", {CHANGELOG: "false"}),
           Variant("without: checkpoint files through FileSystem", {CHECKPOINT_FILES: SPARK_DEFAULT_FILES},
                   steady=False),
           Variant("without: shuffle partitions = cores (vs 4)", {"spark.sql.shuffle.partitions": "4"})]
VARIANTS = [Variant("all settings on"), *CHANGES,
            Variant("all off", {k: v for c in CHANGES for k, v in c.conf.items()}, per_event=True)]


def measure(spark, bootstrap: str, work: Path, seed: int, tiny: int, steady: int) -> list[list]:
    """[[variant, tiny BatchStats, steady BatchStats or None]] in VARIANTS' order."""
    job = patterns.job("tweet-views")
    per_event = solutions.from_file(PER_EVENT)
    rest = send_events(bootstrap, "tweet-views", seed, tiny, steady)
    rows, runs = [], itertools.count()

    def one(variant: Variant, kind: str, per_trigger: int):
        log(f"{variant.name}: {kind} batches ({per_trigger:,} per trigger)")
        with session_conf(spark, variant.conf):
            return run_job(spark, job, bootstrap, work / f"run-{next(runs)}", per_trigger,
                           variant.name, 300 + (tiny + steady) / 50, per_event if variant.per_event else None)

    for variant in VARIANTS:
        rows.append([variant, one(variant, "tiny", TINY_PER_TRIGGER), None])
    if steady:
        send(bootstrap, rest, progress=False)
        for row in rows:
            if row[0].steady:
                row[2] = one(row[0], "steady", STEADY_PER_TRIGGER)
    return rows


def _ratio(a, b) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def format_ablation(rows: list[list]) -> str:
    base_tiny, base_rate = rows[0][1].median_ms, rows[0][2].rate if rows[0][2] else None
    width = max(len(variant.name) for variant, *_ in rows)
    lines = [f"Ablation (tweet views, whole job, one run): each setting turned off alone; tiny = {TINY_PER_TRIGGER} "
             f"records per trigger, steady = {STEADY_PER_TRIGGER:,}",
             f"  {'variant':<{width}} {'tiny batch ms':>13} {'x of on':>8} {'steady ev/s':>11} {'on / off':>9}"]
    for variant, small, big in rows:
        rate = big.rate if big else None
        lines.append(f"  {variant.name:<{width}} {small.median_ms:>13,.0f} {_ratio(small.median_ms, base_tiny):>8} "
                     f"{'-' if rate is None else f'{rate:,.0f}':>11} {_ratio(base_rate, rate):>9}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.ablation", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tiny-events", type=int, default=1000)
    parser.add_argument("--steady-events", type=int, default=60000, help="0: tiny batches only")
    args = parser.parse_args(argv)
    with lab("ablation") as (spark, bootstrap, work):
        rows = measure(spark, bootstrap, work, args.seed, args.tiny_events, args.steady_events)
    print(format_ablation(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
