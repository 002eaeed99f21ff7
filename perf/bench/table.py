"""The bench's output: per pattern its tiny batch, its steady rate and its ceiling; the latency line.

Why the ceiling beside each pattern: absolute numbers depend on the machine; how close a job comes
to the same wiring with processors that do nothing travels better."""
from __future__ import annotations

import os
import platform

from perf.bench.batches import BatchStats
from perf.bench.latency import Latency
from joinlab.spark import spark_master

TINY_PER_TRIGGER, STEADY_PER_TRIGGER = 100, 20_000
# The lab's speed targets per pattern: a tiny batch's median ms, and the steady rate in events/s.
TARGETS = {"ad-clicks": (700, 10_000), "tweet-views": (700, 10_000), "car-pollution": (700, 10_000),
           "lottery": (700, 5_000), "money-enrichment": (700, 5_000)}

# {pattern: [tiny, steady]}: a pattern's two runs; steady is None when the bench ran without it.
Runs = dict[str, list[BatchStats | None]]


def _n(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_patterns(lab: Runs) -> str:
    """Each pattern's whole job: tiny batches, steady batches, each with its start-up apart."""
    lines = [f"Micro-batches per pattern (whole job; median of the batches after the first; "
             f"tiny = {TINY_PER_TRIGGER} records per trigger, steady = {STEADY_PER_TRIGGER:,} per trigger)",
             f"  {'pattern':<18} {'tiny batch ms':>13} {'start-up ms':>11} {'steady ev/s':>11} {'steady batch ms':>15} "
             f"{'start-up ms':>11}"]
    for pattern, (small, big) in lab.items():
        lines.append(f"  {pattern:<18} {_n(small.median_ms):>13} {_n(small.first_ms):>11} "
                     f"{_n(big.rate if big else None):>11} {_n(big.median_ms if big else None):>15} "
                     f"{_n(big.first_ms if big else None):>11}")
    return "\n".join(lines)


def format_ceiling(lab: Runs, nothing: Runs) -> str:
    """Each pattern's job beside the same job with processors that do nothing, and the target; "-"
    for a pattern with no processors of its own (Spark's own join: the job is its ceiling)."""
    lines = ["The ceiling: each job with processors that do nothing (same wiring, same events; the best its own "
             "processors can reach here)",
             f"  {'pattern':<18} {'tiny ms: lab':>12} {'nothing':>8} {'target':>7} "
             f"{'steady ev/s: lab':>16} {'nothing':>8} {'target':>7}"]
    for pattern, (lab_small, lab_big) in lab.items():
        small, big = nothing.get(pattern, (None, None))
        tiny_target, steady_target = TARGETS.get(pattern, (None, None))
        lines.append(f"  {pattern:<18} {_n(lab_small.median_ms):>12} {_n(small.median_ms if small else None):>8} "
                     f"{_n(tiny_target):>7} {_n(lab_big.rate if lab_big else None):>16} "
                     f"{_n(big.rate if big else None):>8} {_n(steady_target):>7}")
    return "\n".join(lines)


def format_latency(latency: Latency, rate: float, trigger: str) -> str:
    lines = [f"End-to-end latency (tweet views running, trigger {trigger}; {latency.sent:,} tweets sent at "
             f"{rate:,.0f}/s in {latency.send_s:.1f} s; a tweet's Kafka timestamp to its first view's)",
             f"  p50 {latency.percentile(50):,.0f} ms, p99 {latency.percentile(99):,.0f} ms; matched "
             f"{len(latency.latencies):,}/{latency.sent:,} ({latency.by_newer} by a newer version); "
             f"median batch {_n(latency.median_batch_ms)} ms"]
    if latency.incomplete:
        lines.append(f"  {latency.incomplete}")
    return "\n".join(lines)


def machine_line(broker: str) -> str:
    import pyspark
    return (f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, PySpark {pyspark.__version__}, "
            f"Spark master {spark_master()}, broker: {broker}")


def format_all(lab: Runs, nothing: Runs, latency: Latency | None, rate: float, trigger: str, broker: str) -> str:
    parts = [format_patterns(lab), format_ceiling(lab, nothing)]
    if latency is not None:
        parts.append(format_latency(latency, rate, trigger))
    return "\n\n".join(parts + [machine_line(broker)])
