"""Step 6: micro-batch floor, steady rate, stage breakdown and ablation, on a broker of its own.

Why its own (embedded) broker: every run here reads its pattern's topics from the beginning, so
the topics must hold exactly the events meant for it (step 1's 50,000 tweet-views events would be
read again). Every pattern gets `tiny` events (read 100 per trigger: the per-batch floor a
notebook user sees) and then `steady` more (read 20,000 per trigger: the steady rate). The first
batch of every run is start-up and is reported apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from joinlab.bench.batches import BatchStats, PHASES, run_job, run_pipeline, run_stage_alone, stage_pipelines
from joinlab.bench.step import log
from joinlab.spark import CHECKPOINT_FILES, FILE_CONTEXT_FILES, STATE_STORE_CONF

TINY_PER_TRIGGER, STEADY_PER_TRIGGER = 100, 20_000
# The lab's speed targets per pattern: a tiny batch's median ms, and the steady rate in events/s.
TARGETS = {"tweet-views": (700, 10_000), "car-pollution": (700, 10_000), "lottery": (700, 5_000),
           "money-enrichment": (700, 5_000)}
(CHANGELOG,) = list(STATE_STORE_CONF)


@dataclass
class Change:
    """One speed change and how to turn it off for the ablation."""
    name: str
    options: dict  # source/sink options that turn it off
    conf: dict  # Spark settings that turn it off
    per_event: bool = False  # the per-event processor instead of the lab's
    steady: bool = True  # worth a steady run (changes the state path), not only a tiny one


CHANGES = [
    Change("tweet views: state per key, not per event", {}, {}, per_event=True),
    Change("RocksDB changelog checkpointing", {}, {CHANGELOG: "false"}),
    Change("checkpoint files through FileSystem, not FileContext", {}, {CHECKPOINT_FILES: FILE_CONTEXT_FILES},
           steady=False),
    Change("shuffle partitions = cores (vs 4)", {}, {"spark.sql.shuffle.partitions": "4"}),
]


def _setup(bootstrap: str, pattern: str, seed: int, tiny: int, steady: int):
    """Topics of `pattern`, its first `tiny` events sent; returns the rest (sent by the caller)."""
    from joinlab import patterns
    from joinlab.generate import send
    from joinlab.topics import create_topics
    create_topics(bootstrap, patterns.all_topics(pattern))
    records = list(patterns.generator(pattern).generate(seed, tiny + steady))
    send(bootstrap, records[:tiny], progress=False)
    return records[tiny:]


def measure(spark, bootstrap: str, seed: int, work: Path, tiny: int, steady: int, ablation: bool,
            timeout_s: float) -> dict:
    """{"patterns": {pattern: [tiny, steady]}, "ceiling": {pattern: [tiny, steady]}, "alone": {pattern:
    steady}, "stages": [BatchStats], "ablation": [(label, tiny, steady)]}. The ceiling is each job with
    processors that do nothing (joinlab.bench.ceiling), on the same events; "alone" is each job's
    build() on the same events from files, to a noop sink (batches.run_stage_alone)."""
    from jobs.tweet_views import job as tweet_views
    from joinlab import patterns
    from joinlab.bench import per_event
    from joinlab.generate import send
    out: dict = {"patterns": {}, "ceiling": {}, "alone": {}, "stages": [], "ablation": []}
    rest = {}
    for pattern in patterns.PATTERNS:
        rest[pattern] = _setup(bootstrap, pattern, seed, tiny, steady)
    log(f"step 6 tweet-views stages: {len(stage_pipelines(tweet_views))} pipelines, {TINY_PER_TRIGGER} per trigger")
    for label, frame_of in stage_pipelines(tweet_views).items():
        out["stages"].append(run_pipeline(spark, tweet_views, frame_of, bootstrap, work / f"stage-{len(out['stages'])}",
                                          TINY_PER_TRIGGER, label, timeout_s))
    for pattern in patterns.PATTERNS:
        job = patterns.job(pattern)
        lab, nothing = _with_ceiling(spark, job, pattern, bootstrap, work, "tiny", TINY_PER_TRIGGER, timeout_s)
        out["patterns"][pattern], out["ceiling"][pattern] = [lab, None], [nothing, None]
    if ablation:
        for label, change in [("all changes on", None)] + [(f"without: {c.name}", c) for c in CHANGES] + \
                             [("all changes off (before)", "all")]:
            log(f"step 6 ablation, tiny: {label}")
            out["ablation"].append([label, _ablation_run(spark, tweet_views, per_event, bootstrap, work, change,
                                                         TINY_PER_TRIGGER, timeout_s), None, change])
    if not steady:  # --steady-events 0: the tiny rows only; steady columns print "-"
        return out
    for pattern in patterns.PATTERNS:
        send(bootstrap, rest[pattern], progress=False)
    for pattern in patterns.PATTERNS:
        job = patterns.job(pattern)
        out["patterns"][pattern][1], out["ceiling"][pattern][1] = _with_ceiling(
            spark, job, pattern, bootstrap, work, "steady", STEADY_PER_TRIGGER, timeout_s)
        log(f"step 6 {pattern}, stage alone: steady batches ({STEADY_PER_TRIGGER} per trigger, from files)")
        out["alone"][pattern] = run_stage_alone(spark, job, bootstrap, work / f"{pattern}-alone", STEADY_PER_TRIGGER,
                                                f"{pattern}, stage alone", timeout_s)
    for row in out["ablation"]:
        change = row[3]
        if change is None:
            row[2] = out["patterns"]["tweet-views"][1]
        elif change == "all" or change.steady:
            log(f"step 6 ablation, steady: {row[0]}")
            row[2] = _ablation_run(spark, tweet_views, per_event, bootstrap, work, change, STEADY_PER_TRIGGER,
                                   timeout_s)
    return out


def _with_ceiling(spark, job, pattern: str, bootstrap: str, work: Path, kind: str, per_trigger: int,
                  timeout_s: float) -> list[BatchStats]:
    """The pattern's job, then the same job with processors that do nothing (its ceiling)."""
    from joinlab.bench import ceiling
    from joinlab.job import services
    runs = []
    for label, solution in ((pattern, None), (f"{pattern}, nothing", ceiling.solution(job))):
        log(f"step 6 {label}: {kind} batches ({per_trigger} per trigger)")
        with services(job, bootstrap):
            runs.append(run_job(spark, job, bootstrap, work / f"{label.replace(', ', '-')}-{kind}", per_trigger,
                                label, timeout_s, solution))
    return runs


def _ablation_run(spark, job, per_event, bootstrap, work: Path, change, per_trigger: int, timeout_s: float):
    changes = CHANGES if change == "all" else [change] if change is not None else []
    options = {k: v for c in changes for k, v in c.options.items()}
    conf = {k: v for c in changes for k, v in c.conf.items()}
    solution = per_event if any(c.per_event for c in changes) else None
    name = f"ablation-{len(list(work.glob('ablation-*')))}"
    return run_job(spark, job, bootstrap, work / name, per_trigger, name, timeout_s, solution, options, conf)


# --- Output ------------------------------------------------------------------------------------

def _ms(value) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_micro(out: dict) -> str:
    lines = [f"Micro-batches per pattern (whole job; median of the batches after the first; "
             f"tiny = {TINY_PER_TRIGGER} records per trigger, steady = {STEADY_PER_TRIGGER:,} per trigger)",
             f"  {'pattern':<18} {'tiny batch ms':>13} {'start-up ms':>11} {'steady ev/s':>11} {'steady batch ms':>15} "
             f"{'start-up ms':>11}"]
    for pattern, (small, big) in out["patterns"].items():
        lines.append(f"  {pattern:<18} {_ms(small.median_ms):>13} {_ms(small.first_ms):>11} "
                     f"{_ms(big.rate if big else None):>11} {_ms(big.median_ms if big else None):>15} "
                     f"{_ms(big.first_ms if big else None):>11}")
    if out.get("ceiling"):
        lines += ["", format_ceiling(out)]
    if out.get("alone"):
        lines += ["", format_alone(out)]
    lines += ["", "Where a tiny batch's time goes (tweet views; median ms; phases are Spark's durationMs, "
                  "state = the transformWithState operator's own timers)",
              f"  {'pipeline':<46} {'batch':>6} " + " ".join(f"{p:>13}" for p in PHASES)
              + f" {'state update':>12} {'state commit':>12}"]
    for s in out["stages"]:
        lines.append(_stage_line(s.label, s))
    tv_small = out["patterns"]["tweet-views"][0]
    lines.append(_stage_line("whole job, as `joinlab run` starts it", tv_small))
    tv_big = out["patterns"]["tweet-views"][1]
    if tv_big:
        lines.append(_stage_line(f"the same, steady ({STEADY_PER_TRIGGER:,} per trigger)", tv_big))
    by = {s.label: s.median_ms for s in out["stages"]}
    diffs = [("source (read tasks, Kafka fetch)", by.get("source -> noop")),
             ("+ parse and dead letters (2nd scan)", _minus(by.get("source -> parse -> noop"), by.get("source -> noop"))),
             ("+ Kafka sink", _minus(by.get("source -> parse -> Kafka sink (no state)"), by.get("source -> parse -> noop"))),
             ("+ transformWithState", _minus(by.get("source -> parse -> transformWithState -> noop"),
                                             by.get("source -> parse -> noop")))]
    lines += ["", "  differences (ms): " + "; ".join(f"{label} {_ms(v)}" for label, v in diffs)]
    if out["ablation"]:
        base_tiny, base_rate = out["ablation"][0][1].median_ms, (out["ablation"][0][2].rate if out["ablation"][0][2] else None)
        width = max(len(label) for label, *_ in out["ablation"])
        lines += ["", "Ablation (tweet views, whole job, one run): each change turned off alone",
                  f"  {'variant':<{width}} {'tiny batch ms':>13} {'x of on':>8} {'steady ev/s':>11} {'on / off':>9}"]
        for label, small, big, _ in out["ablation"]:
            rate = big.rate if big else None
            lines.append(f"  {label:<{width}} {_ms(small.median_ms):>13} {_ratio(small.median_ms, base_tiny):>8} "
                         f"{_ms(rate):>11} {_ratio(base_rate, rate):>9}")
    return "\n".join(lines)


def format_ceiling(out: dict) -> str:
    """Each pattern's job beside the same job with processors that do nothing, and the target."""
    lines = ["The ceiling: each job with processors that do nothing (same wiring, same events; the best its own "
             "processors can reach here)",
             f"  {'pattern':<18} {'tiny ms: lab':>12} {'nothing':>8} {'target':>7} "
             f"{'steady ev/s: lab':>16} {'nothing':>8} {'target':>7}"]
    for pattern, (small, big) in out["ceiling"].items():
        lab_small, lab_big = out["patterns"][pattern]
        tiny_target, steady_target = TARGETS.get(pattern, (None, None))
        lines.append(f"  {pattern:<18} {_ms(lab_small.median_ms):>12} {_ms(small.median_ms):>8} "
                     f"{_ms(tiny_target):>7} {_ms(lab_big.rate if lab_big else None):>16} "
                     f"{_ms(big.rate if big else None):>8} {_ms(steady_target):>7}")
    return "\n".join(lines)


def format_alone(out: dict) -> str:
    """Each pattern's whole job (Kafka in, Kafka out) beside its stage alone (the same build() on
    the same events from files, to a noop sink), steady batches."""
    lines = [f"The whole job against its stage alone (steady, {STEADY_PER_TRIGGER:,} per trigger; stage alone = the "
             f"job's build() on the same events read from files, to a noop sink)",
             f"  {'pattern':<18} {'whole job ev/s':>14} {'stage alone ev/s':>16} {'whole / alone':>13}"]
    for pattern, alone in out["alone"].items():
        whole = out["patterns"][pattern][1]
        lines.append(f"  {pattern:<18} {_ms(whole.rate if whole else None):>14} {_ms(alone.rate):>16} "
                     f"{_percent(whole.rate if whole else None, alone.rate):>13}")
    return "\n".join(lines)


def _percent(a, b) -> str:
    return "-" if not a or not b else f"{100 * a / b:.0f}%"


def _stage_line(label: str, s: BatchStats) -> str:
    return (f"  {label:<46} {_ms(s.median_ms):>6} " + " ".join(f"{_ms(s.phases.get(p)):>13}" for p in PHASES)
            + f" {_ms(s.state.get('allUpdatesTimeMs')):>12} {_ms(s.state.get('commitTimeMs')):>12}")


def _minus(a, b):
    return None if a is None or b is None else a - b


def _ratio(a, b) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"

