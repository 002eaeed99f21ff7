"""Step 1, and the setup before it: produce the events once, then read them with a raw client.

Why: the raw clients' rates are the floor every Spark row is compared with (see the ratios)."""
from __future__ import annotations

import time

from jobs.tweet_views.job import INPUT_TOPICS, OUTPUT_TOPICS
from joinlab.bench.offsets import Ranges, read_ranges, size
from joinlab.bench.step import BenchError, Deadline
from joinlab.bench.table import Measurement
from joinlab.generate import Record, send
from joinlab.topics import create_topics, plain_consumer


def produce_events(bootstrap: str, records: list[Record]) -> tuple[Measurement, Ranges]:
    """Produce the events once; every later step reads these, so the input topics must be empty
    (the job reads its topics from the beginning: older records would change what it measures)."""
    create_topics(bootstrap, INPUT_TOPICS + OUTPUT_TOPICS)
    before = size(read_ranges(bootstrap, INPUT_TOPICS))
    if before:
        raise BenchError(f"the input topics {', '.join(INPUT_TOPICS)} at {bootstrap} already hold {before} "
                         "records; the bench needs them empty so that every step reads the same events. "
                         "Run it on a fresh embedded broker (unset KAFKA_BOOTSTRAP_SERVERS, no --bootstrap) "
                         "or on a Kafka without these topics.")
    start = time.monotonic()
    sent = send(bootstrap, records, progress=True)
    seconds = time.monotonic() - start
    ranges = read_ranges(bootstrap, INPUT_TOPICS)
    if size(ranges) != sent:
        raise BenchError(f"sent {sent} records but the input topics hold {size(ranges)}")
    return Measurement("produce (kafka-python, generate.send)", sent, seconds, "setup; not compared"), ranges


# --- Step 1: raw clients -----------------------------------------------------------------------

def _confluent_settings(bootstrap: str) -> dict:
    """A plain librdkafka consumer reading whole topics from assigned partitions."""
    return {"bootstrap.servers": bootstrap, "group.id": "joinlab-bench", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 50, "queued.max.messages.kbytes": 65536}


def consume_confluent(bootstrap: str, ranges: Ranges, timeout_s: float) -> Measurement:
    """confluent-kafka (librdkafka), manual assign, whole topics; one Record built per message so
    that both clients do the same per-record work. End offsets are known beforehand for both."""
    from confluent_kafka import Consumer, TopicPartition
    from joinlab.topics import Record as Read
    deadline = Deadline(timeout_s, "step 1a (confluent-kafka consume)")
    pending = {tp: end for tp, (begin, end) in ranges.items() if end > begin}
    out: list[Read] = []
    start = time.monotonic()
    consumer = Consumer(_confluent_settings(bootstrap))
    try:
        consumer.assign([TopicPartition(t, p, ranges[(t, p)][0]) for t, p in pending])
        while pending:
            deadline.check(f"{len(out)} of {size(ranges)} records read")
            for msg in consumer.consume(num_messages=10000, timeout=0.2):
                if msg.error() is not None:
                    raise BenchError(f"step 1a: confluent-kafka consume error: {msg.error()}")
                tp, offset = (msg.topic(), msg.partition()), msg.offset()
                end = pending.get(tp)
                if end is None or offset >= end:
                    continue
                out.append(Read(tp[0], tp[1], offset, msg.key(), msg.value(), msg.timestamp()[1]))
                if offset + 1 >= end:
                    del pending[tp]
    finally:
        consumer.close()
    seconds = time.monotonic() - start
    return Measurement("1a consume: confluent-kafka", len(out), seconds, "manual assign, 1 process")


def consume_kafka_python(bootstrap: str, ranges: Ranges, timeout_s: float) -> Measurement:
    """kafka-python, manual assign, whole topics: the loop of joinlab.topics.read_topics (the lab's
    plain-client baseline) with the end offsets given, as for confluent-kafka."""
    from kafka import TopicPartition
    from joinlab.topics import Record as Read
    deadline = Deadline(timeout_s, "step 1b (kafka-python consume)")
    pending = {TopicPartition(t, p): end for (t, p), (begin, end) in ranges.items() if end > begin}
    out: list[Read] = []
    start = time.monotonic()
    consumer = plain_consumer(bootstrap)
    try:
        consumer.assign(list(pending))
        for tp in pending:
            consumer.seek(tp, ranges[(tp.topic, tp.partition)][0])
        while pending:
            deadline.check(f"{len(out)} of {size(ranges)} records read")
            for tp, records in consumer.poll(timeout_ms=200, max_records=10000).items():
                end = pending.get(tp)
                if end is None:
                    continue
                for r in records:
                    if r.offset < end:
                        out.append(Read(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp))
                if consumer.position(tp) >= end:
                    del pending[tp]
    finally:
        consumer.close()
    seconds = time.monotonic() - start
    return Measurement("1b consume: kafka-python", len(out), seconds, "manual assign, 1 process")
