"""`make demo`: patterns end to end on a fresh broker (a bounded, seeded, out-of-order stream,
the job run until caught up), each checked against its batch reference; exit status 1 on a mismatch.
"""
from __future__ import annotations

import contextlib
import sys
import time

from joinlab import runner
from joinlab import patterns
from joinlab.broker import EmbeddedBroker
from joinlab.config import lab_home, query_name, topic_prefix
from joinlab.generate import Disorder, send, summary
from joinlab.kafka_settings import settings
from joinlab.spark import session, stop
from joinlab.topics import addressed, create_topics, owned
from joinlab.verify import verify

# Out of order, with duplicates and a few malformed records: the conditions the job must survive.
DEMO_DISORDER = Disorder(delayed=0.3, max_delay_s=5.0, duplicates=0.05, malformed=0.01)


@contextlib.contextmanager
def demo_broker():
    """The Kafka settings' bootstrap.servers when given ($KAFKA_BOOTSTRAP_SERVERS, or the file
    $LAB_KAFKA_PROPERTIES names), else an embedded broker that lives for the demo only."""
    if configured := settings().bootstrap:
        yield configured
        return
    with EmbeddedBroker(log_path=lab_home() / "demo-broker.log") as broker:
        yield broker.bootstrap_servers


def say(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def run_demos(chosen: list[str], seed: int = 7, count: int = 20000, solution=None) -> list[str]:
    """Each chosen pattern's demo, on one broker and one Spark session (a second pattern starts on a
    warm JVM); returns the patterns whose output did not match. `solution`: the module the job's
    processors come from (a candidate's file, for one pattern; None: the lab's)."""
    with demo_broker() as bootstrap:
        say(f"broker at {bootstrap}; starting Spark")
        spark = session("demo")
        try:
            return [p for p in chosen if run_demo(p, spark, bootstrap, seed, count, solution) != 0]
        finally:
            stop(spark)


def run_demo(pattern: str, spark, bootstrap: str, seed: int, count: int, solution=None) -> int:
    started = time.monotonic()
    job, generator = patterns.job(pattern), patterns.generator(pattern)
    topics = owned(patterns.all_topics(pattern))  # a participant's own (joinlab.topics.own)
    say(f"{pattern}: creating topics {', '.join(topics)}")
    create_topics(bootstrap, topics)
    records = generator.generate(seed, count, disorder=DEMO_DISORDER)
    say(f"producing {len(records)} records (seed {seed}): {summary(records)}")
    send(bootstrap, addressed(records), progress=False)
    say("starting the job (runs until it has caught up)")
    checkpoint = runner.new_checkpoint(pattern)
    with runner.services(job, bootstrap):
        query = runner.start(spark, job, bootstrap, checkpoint, available_now=True, name=query_name(f"demo_{pattern}"),
                             solution=solution, input_prefix=topic_prefix(), output_prefix=topic_prefix())
        query.awaitTermination()
    say("verifying the output against the batch reference")
    report = verify(pattern, bootstrap)
    elapsed = time.monotonic() - started
    ins = sum(report.records.get(t, 0) for t in job.INPUT_TOPICS)
    outs = ", ".join(f"{report.records.get(t, 0)} to {t}" for t in job.OUTPUT_TOPICS)
    print(f"\n{pattern} demo")
    print(f"  events in      {ins} ({summary(records)})")
    print(f"  records out    {outs}")
    print("\n".join("  " + line for line in report.lines()))
    print(f"  wall time      {elapsed:.1f} s (after the broker and Spark started)")
    return 0 if report.ok else 1
