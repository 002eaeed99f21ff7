"""`make bench` (`python -m perf.bench`): what a user asks of each pattern, measured on one warm Spark session.

Per pattern: the tiny batch (100 records per trigger: the per-batch floor a notebook or a demo
feels), the steady rate (20,000 per trigger), and the ceiling (the same job with processors that
do nothing: the best its own processors can reach in this wiring); then the end-to-end latency
of tweet views running at a fixed input rate; then tweet views as a user runs it, `joinlab run` in
fresh processes, beside its JVM peer when that is built (perf.user_runs). The studies behind the lab's settings live apart,
in perf/ (perf/README.md); docs/benchmarks.md keeps every run's numbers.

Why one broker with empty topics: every run reads its pattern's topics from the beginning, so they
must hold exactly the events meant for it. Progress goes to stderr, the tables to stdout.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import uuid
from contextlib import ExitStack

from joinlab import patterns
from pathlib import Path

from perf import user_runs
from perf.bench import ceiling
from perf.bench.batches import BenchError, fill, log, run_job
from perf.bench.latency import end_to_end_latency
from perf.bench.table import STEADY_PER_TRIGGER, TINY_PER_TRIGGER, format_all
from joinlab.config import lab_home

# Loggers that would flood stderr, quieted only when the level is the default WARN: "current batch
# is falling behind" is expected in the latency run, where a batch outlasts the trigger.
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m perf.bench", description=(
        "Per pattern: the tiny batch, the steady rate and the ceiling (processors that do nothing); "
        "then the tweet-views job's end-to-end latency at a fixed rate."))
    parser.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    parser.add_argument("--tiny-events", type=int, default=1000,
                        help=f"events per pattern read {TINY_PER_TRIGGER} per trigger, for the per-batch floor "
                             "(default 1000)")
    parser.add_argument("--steady-events", type=int, default=60000,
                        help=f"events per pattern read {STEADY_PER_TRIGGER:,} per trigger, for the steady rate "
                             "(default 60000; 0: no steady runs)")
    parser.add_argument("--latency-rate", type=float, default=1000.0,
                        help="tweets per second during the latency run (default 1000)")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="seconds of tweets during the latency run (default 10; 0: no latency run)")
    parser.add_argument("--latency-trigger", default="100 milliseconds",
                        help="processing-time trigger of the running job (default '100 milliseconds')")
    parser.add_argument("--yardstick-rounds", type=int, default=1,
                        help="rounds of tweet views in fresh processes, `joinlab run --json` beside the JVM peer "
                             "(../shared/peers/spark_jvm_tweet_views, when its jar is built) on the same events "
                             "(perf.user_runs; default 1, 0: none)")
    parser.add_argument("--peer", type=Path, default=user_runs.PEER,
                        help="the JVM peer's folder, its jar built by `mvn -q package` (default %(default)s)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers whose lab topics are empty (default: "
                                            "$KAFKA_BOOTSTRAP_SERVERS, else an embedded broker started for this run)")
    args = parser.parse_args(argv)
    if args.tiny_events < 2 * TINY_PER_TRIGGER:
        parser.error(f"--tiny-events must be at least {2 * TINY_PER_TRIGGER} (the first batch is start-up)")
    if args.steady_events < 0 or args.latency_rate <= 0 or args.latency_seconds < 0:
        parser.error("--steady-events and --latency-seconds must be >= 0, --latency-rate > 0")
    return args


def _budget(records: int, floor_rate: float = 50, base_s: float = 300.0) -> float:
    """A deadline generous enough for a slow laptop: `base_s` plus the records at `floor_rate`/s."""
    return base_s + records / floor_rate


def _broker(args: argparse.Namespace, stack: ExitStack) -> tuple[str, str]:
    """(bootstrap, label): --bootstrap, else $KAFKA_BOOTSTRAP_SERVERS, else an embedded broker
    started for this run (stopped when `stack` closes)."""
    given = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given, f"the bootstrap given ({given})"
    from joinlab.broker import EmbeddedBroker
    log("starting an embedded Apache Kafka broker for this run")
    broker = stack.enter_context(EmbeddedBroker())
    return broker.bootstrap_servers, f"embedded Apache Kafka {broker.info.version} ({broker.bootstrap_servers})"


def _spark(stack: ExitStack):
    """The lab's session (a running lab's server, else one in this process), stopped when `stack`
    closes, before the broker."""
    from joinlab.spark import session, stop
    spark = session("joinlab-bench")
    stack.callback(stop, spark)
    return spark


def _lab_and_nothing(spark, pattern: str, bootstrap: str, work, kind: str, per_trigger: int, timeout_s: float):
    """(the pattern's job, the same job with processors that do nothing), `per_trigger` records a batch;
    a job with no processors of its own (Spark's own join) is its own ceiling: (the job, None)."""
    from joinlab.runner import services
    job = patterns.job(pattern)
    runs = []
    for label, solution in ((pattern, None), *([(f"{pattern}, nothing", ceiling.solution(job))] if job.STAGES else [])):
        log(f"{label}: {kind} batches ({per_trigger:,} per trigger)")
        with services(job, bootstrap):
            runs.append(run_job(spark, job, bootstrap, work / f"{label.replace(', ', '-')}-{kind}", per_trigger,
                                label, timeout_s, solution))
    return runs if job.STAGES else runs + [None]


def run(args: argparse.Namespace) -> str:
    """Every measurement in order; returns the tables."""
    from joinlab.generate import send
    with ExitStack() as stack:
        bootstrap, broker_label = _broker(args, stack)
        work = lab_home() / f"bench-{uuid.uuid4().hex[:8]}"  # under LAB_HOME: shared with executors
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        log(f"generating {args.tiny_events + args.steady_events} events per pattern (seed {args.seed}); "
            f"sending the first {args.tiny_events}")
        steady = {}
        for pattern in patterns.PATTERNS:
            records = fill(bootstrap, pattern, args.seed, args.tiny_events + args.steady_events)
            send(bootstrap, records[:args.tiny_events], progress=False)
            steady[pattern] = records[args.tiny_events:]
        spark = _spark(stack)
        lab, nothing = {}, {}
        for pattern in patterns.PATTERNS:
            small = _lab_and_nothing(spark, pattern, bootstrap, work, "tiny", TINY_PER_TRIGGER,
                                     _budget(args.tiny_events))
            lab[pattern] = [small[0], None]
            if small[1] is not None:
                nothing[pattern] = [small[1], None]
        if args.steady_events:
            log(f"sending {args.steady_events} more events per pattern")
            for pattern in patterns.PATTERNS:
                send(bootstrap, steady[pattern], progress=False)
            for pattern in patterns.PATTERNS:
                big = _lab_and_nothing(spark, pattern, bootstrap, work, "steady", STEADY_PER_TRIGGER,
                                       _budget(args.tiny_events + args.steady_events))
                lab[pattern][1] = big[0]
                if pattern in nothing:
                    nothing[pattern][1] = big[1]
        latency = None
        if args.latency_seconds:
            log(f"latency: tweet views running ({args.latency_trigger} trigger), "
                f"{args.latency_rate:g} tweets/s for {args.latency_seconds:g} s")
            caught_up = work / f"tweet-views-{'steady' if args.steady_events else 'tiny'}"
            latency = end_to_end_latency(spark, bootstrap, caught_up, args.seed + 1, args.latency_rate,
                                         args.latency_seconds, args.latency_trigger)
        log("stopping Spark and the broker")
    tables = format_all(lab, nothing, latency, args.latency_rate, args.latency_trigger, broker_label)
    if args.yardstick_rounds:
        log("yardstick: tweet views in fresh processes, the lab's job and the JVM peer")
        tables += "\n\n" + user_runs.format_rows(user_runs.measure([Path.cwd()], args.peer, args.yardstick_rounds,
                                                                  args.tiny_events, args.steady_events))
    return tables


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    from joinlab.broker import BrokerError
    try:
        tables = run(args)
    except (BenchError, BrokerError, TimeoutError) as exc:
        log(f"FAILED: {exc}")
        raise SystemExit(1) from None
    print(tables)
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
