"""`joinlab bench`: where the time goes, measured side by side on the SAME events.

Why one run and one event set: a ratio between two numbers is only meaningful when both read
exactly the same records from the same broker on the same machine. So the tweet-views events of
one seed are produced once, then read by a raw client (confluent-kafka, kafka-python), by Spark's
Kafka source alone (noop sink), by the tweet-views job, and joined in plain Python; finally the
job runs continuously at a fixed input rate to measure end-to-end latency. Every other pattern's
job gets one row (3b, ...) on its own seeded events, on the same warmed-up session. Step 6
(joinlab.bench.micro) measures micro-batches: each pattern's per-batch floor and steady rate,
tweet views stage by stage, and the ablation of each speed change. Step 7
(joinlab.bench.cold_start) starts fresh JVMs, with the class archive and without.

Each measurement is one function in this package; each has a deadline and fails with a message
that says what did not finish, instead of hanging. Progress goes to stderr, the table to stdout.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import uuid
from contextlib import ExitStack

from generators.tweet_views import generate
from joinlab.bench.clients import consume_confluent, consume_kafka_python, produce_events
from joinlab.bench.latency import end_to_end_latency
from joinlab.bench.lookup_rate import lookup_path
from joinlab.bench.plain_python import plain_python_dict, plain_python_tws
from joinlab.bench.spark_rates import (pattern_job, spark_source_batch, spark_source_stream, start_spark,
                                       tweet_views_job, warm_up)
from joinlab.bench.step import BenchError, log
from joinlab.bench.table import Measurement, format_table, machine_line, ratios
from joinlab.config import lab_home
from joinlab.generate import Disorder

STEPS = 7


def _budget(records: int, floor_rate: float, base_s: float = 120.0) -> float:
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="joinlab bench", description=(
        "Benchmark on one set of tweet-views events: raw Kafka clients, Spark's Kafka source, the "
        "tweet-views job, the same join in plain Python, and end-to-end latency."))
    parser.add_argument("--events", type=int, default=50000, help="events to produce (default 50000)")
    parser.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    parser.add_argument("--pattern-events", type=int, default=20000,
                        help="events for each other pattern's job row (default 20000)")
    parser.add_argument("--lookups", type=int, default=2000,
                        help="session lookups for the money-enrichment lookup row (default 2000)")
    parser.add_argument("--latency-rate", type=float, default=1000.0,
                        help="tweets per second during the latency run (default 1000)")
    parser.add_argument("--latency-seconds", type=float, default=10.0,
                        help="seconds of tweets during the latency run (default 10)")
    parser.add_argument("--tiny-events", type=int, default=1000,
                        help="events per pattern read 100 per trigger, for the per-batch floor (default 1000)")
    parser.add_argument("--steady-events", type=int, default=60000,
                        help="events per pattern read 20,000 per trigger, for the steady rate (default 60000; 0: no steady runs)")
    parser.add_argument("--no-ablation", action="store_true", help="skip the ablation table (saves minutes)")
    parser.add_argument("--cold-starts", type=int, default=2,
                        help="fresh-JVM runs per variant (class archive on, off) in step 7 (default 2; 0: skip)")
    parser.add_argument("--micro-only", action="store_true", help="skip steps 1-5: run step 6 (micro-batches) and step 7 (cold start) only")
    parser.add_argument("--latency-trigger", default="100 milliseconds",
                        help="processing-time trigger of the running job (default '100 milliseconds')")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS, "
                                            "else an embedded broker started for this run)")
    args = parser.parse_args(argv)
    if args.events < 10:
        parser.error("--events must be at least 10")
    if args.latency_rate <= 0 or args.latency_seconds <= 0:
        parser.error("--latency-rate and --latency-seconds must be > 0")
    return args


def _spark(stack: ExitStack):
    """The lab's session (stopped when `stack` closes, unless it was running) and its Kafka format."""
    spark, stop_spark = start_spark()
    if stop_spark:
        stack.callback(spark.stop)
    return spark, "kafka"


def _steps_1_to_5(args: argparse.Namespace, stack: ExitStack, bootstrap: str, work, rows: list):
    """Steps 1 to 5 on the same tweet-views events; returns (spark, its Kafka format)."""
    log(f"generating {args.events} tweet-views events (seed {args.seed}) and producing them to {bootstrap}")
    records = generate(args.seed, args.events, disorder=Disorder())
    produced, ranges = produce_events(bootstrap, records)
    n = produced.records
    rows.append(produced)

    log(f"step 1/{STEPS} raw clients: confluent-kafka, then kafka-python ({n} records)")
    rows.append(consume_confluent(bootstrap, ranges, _budget(n, 500)))
    rows.append(consume_kafka_python(bootstrap, ranges, _budget(n, 500)))

    log(f"step 2/{STEPS} spark source: starting Spark and warming it up (not timed)")
    spark, fmt = _spark(stack)
    warm_up(spark, bootstrap, ranges, 300)
    log(f"step 2/{STEPS} spark source: readStream -> noop (availableNow), then a batch count()")
    rows.append(spark_source_stream(spark, bootstrap, n, work / "noop", _budget(n, 100)))
    rows.append(spark_source_batch(spark, bootstrap, n, _budget(n, 100)))

    log(f"step 3/{STEPS} tweet-views job (availableNow) on the same {n} events")
    job_checkpoint = work / "tweet-views"
    rows.append(tweet_views_job(spark, bootstrap, n, job_checkpoint, _budget(n, 50, base_s=300)))
    from joinlab.patterns import PATTERNS
    for letter, pattern in zip("bcdefgh", [p for p in PATTERNS if p != "tweet-views"]):
        log(f"step 3/{STEPS} {pattern} job (availableNow) on {args.pattern_events} of its own events")
        rows.append(pattern_job(spark, pattern, bootstrap, args.seed, args.pattern_events, work / pattern,
                                _budget(args.pattern_events, 50, base_s=300), row=f"3{letter}"))
    log(f"step 3/{STEPS} money-enrichment lookup path: {args.lookups} session lookups over HTTP")
    rows.append(lookup_path(bootstrap, args.lookups, _budget(args.lookups, 50, base_s=30)))

    log(f"step 4/{STEPS} plain Python join: TwsTester, then dicts")
    rows.append(plain_python_tws(records, _budget(n, 200)))
    rows.append(plain_python_dict(records, _budget(n, 500)))

    log(f"step 5/{STEPS} end-to-end latency: job running ({args.latency_trigger} trigger), "
        f"{args.latency_rate:g} tweets/s for {args.latency_seconds:g} s")
    rows.append(end_to_end_latency(spark, bootstrap, job_checkpoint, args.seed + 1, args.latency_rate,
                                   args.latency_seconds, args.latency_trigger))
    return spark, fmt


def run(args: argparse.Namespace) -> tuple[list[Measurement], str, dict | None, dict | None]:
    """Every step in order; returns the rows, the machine line, step 6's and step 7's results."""
    rows: list[Measurement] = []
    with ExitStack() as stack:
        bootstrap, broker_label = _broker(args, stack)
        work = lab_home() / f"bench-{uuid.uuid4().hex[:8]}"  # under LAB_HOME: shared with executors
        stack.callback(shutil.rmtree, work, ignore_errors=True)

        spark, fmt = _spark(stack) if args.micro_only else _steps_1_to_5(args, stack, bootstrap, work, rows)
        micro = None
        if args.tiny_events:
            from joinlab.bench.micro import measure
            from joinlab.broker import EmbeddedBroker
            log(f"step 6/{STEPS} micro-batches: every pattern, tiny and steady, on a broker of its own")
            with EmbeddedBroker() as own:
                micro = measure(spark, own.bootstrap_servers, args.seed, work / "micro", args.tiny_events,
                                args.steady_events, not args.no_ablation, _budget(args.steady_events, 50, base_s=300))
        cold = None
        if args.cold_starts:
            from joinlab.bench.cold_start import measure as cold_starts
            from joinlab.broker import EmbeddedBroker
            log(f"step 7/{STEPS} cold start: a fresh JVM per run, with the class archive and without")
            with EmbeddedBroker() as own:
                cold = cold_starts(own.bootstrap_servers, args.seed, work / "cold", args.cold_starts, 300)
        machine = machine_line(broker_label, fmt)
        log("stopping Spark and the broker")
    return rows, machine, micro, cold


FOOTNOTES = [
    "Every row reads the same events, produced once (no duplicates, no malformed records).",
    "Spark rows: the session was started and warmed up (a tiny SQL job and a 10-records-per-partition "
    "Kafka read) before step 2, so JVM start-up is not in the numbers; a query's time runs from "
    "start() to termination (planning, offset lookups, checkpoint writes included).",
    "Rows 3b...: each other pattern's job on its own seeded events (default disorder-free), produced "
    "before its timer starts, on the same warm session; its input topics are separate from step 3's.",
    "Row 3e: the money-enrichment job's lookup client against the lab's session service (both in this "
    "process, real HTTP on 127.0.0.1), each session id once: what a live job's late transactions cost.",
    "Rows 4a/4b read the events from memory (no Kafka I/O): json.loads, the join, and a JSON "
    "encode of each view, in one Python process.",
    "Row 5: records = tweet events sent at the fixed rate, seconds = time spent sending them; latency = "
    "the Kafka timestamp of the first view showing that tweet version or a newer one (a micro-batch "
    "holding a tweet and its edit emits one view, for the edit) - the tweet's Kafka timestamp (which "
    "includes the test producer's 20 ms linger). The job continues from row 3's checkpoint (no "
    "backlog, warm state, fresh ids); the tweets' users were sent and processed first.",
]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    from joinlab.broker import BrokerError
    try:
        rows, machine, micro, cold = run(args)
    except (BenchError, BrokerError, TimeoutError) as exc:
        log(f"FAILED: {exc}")
        raise SystemExit(1) from None
    if rows:
        print(format_table(rows))
        print()
        for note in FOOTNOTES:
            print(f"* {note}")
        print()
        print("ratios (records/s over records/s):")
        print("\n".join(ratios({r.name: r for r in rows})))
        print()
    if micro is not None:
        from joinlab.bench.micro import format_micro
        print(format_micro(micro))
        print()
    if cold is not None:
        from joinlab.bench.cold_start import format_cold_start
        print(format_cold_start(cold))
        print()
    print(machine)
    log(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
