"""Plain-client Kafka helpers on kafka-python: topics, true end offsets, reading a topic whole.

The end-offset probe exists because the embedded broker's ListOffsets("latest") under-reports
(it answers the first offset of the last record batch + 1). The high watermark carried in a
fetch response is right, so we seek to the reported end - 1, fetch once and take the fetch's
high watermark. Real Kafka gives the same answer, so one code path serves both.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from joinlab.config import topic_partitions


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def plain_consumer(bootstrap: str) -> KafkaConsumer:
    """A consumer for manual assignment: no group (a group join costs ~half the session timeout)."""
    return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                         consumer_timeout_ms=1000, request_timeout_ms=30000)


def producer(bootstrap: str, **overrides) -> KafkaProducer:
    settings = dict(bootstrap_servers=bootstrap, linger_ms=20, acks="all", batch_size=64 * 1024)
    settings.update(overrides)
    return KafkaProducer(**settings)


def create_topics(bootstrap: str, names: Iterable[str], partitions: int | None = None,
                  timeout_s: float = 30.0) -> None:
    """Create the topics that do not exist yet and wait until their metadata is visible."""
    names = list(names)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        missing = [n for n in names if n not in set(admin.list_topics())]
        if missing:
            try:
                admin.create_topics([NewTopic(n, partitions or topic_partitions(), 1) for n in missing])
            except TopicAlreadyExistsError:
                pass
        deadline = time.monotonic() + timeout_s
        while not set(names) <= set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {names} not visible after {timeout_s}s")
            time.sleep(0.05)
    finally:
        admin.close()


def partitions_of(consumer: KafkaConsumer, topics: Iterable[str]) -> list[TopicPartition]:
    found = []
    for topic in topics:
        parts = consumer.partitions_for_topic(topic)
        if parts is None:
            consumer.topics()  # refresh metadata once before giving up on the topic
            parts = consumer.partitions_for_topic(topic) or set()
        found += [TopicPartition(topic, p) for p in sorted(parts)]
    return found


def end_offsets(consumer: KafkaConsumer, tps: list[TopicPartition],
                timeout_s: float = 30.0) -> dict[TopicPartition, int]:
    """The true next offset of each partition (see the module docstring for why we probe)."""
    if not tps:
        return {}
    reported = consumer.end_offsets(tps)
    beginning = consumer.beginning_offsets(tps)
    result = {tp: reported[tp] for tp in tps}
    to_probe = [tp for tp in tps if reported[tp] > beginning[tp]]
    if not to_probe:
        return result
    consumer.assign(to_probe)
    for tp in to_probe:
        consumer.seek(tp, reported[tp] - 1)
    fetched: set[TopicPartition] = set()
    deadline = time.monotonic() + timeout_s
    while len(fetched) < len(to_probe):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no fetch answer for {sorted(set(to_probe) - fetched)} in {timeout_s}s")
        for tp, records in consumer.poll(timeout_ms=200).items():
            if records:
                fetched.add(tp)
                result[tp] = max(result[tp], consumer.highwater(tp) or 0, records[-1].offset + 1)
    return result


def read_topics(bootstrap: str, topics: Iterable[str], timeout_s: float = 120.0) -> list[Record]:
    """Every record of `topics`, from the beginning to the true end at call time."""
    consumer = plain_consumer(bootstrap)
    try:
        tps = partitions_of(consumer, topics)
        ends = end_offsets(consumer, tps)
        beginnings = consumer.beginning_offsets(tps)
        pending = {tp for tp in tps if ends[tp] > beginnings[tp]}
        consumer.assign(list(pending))
        for tp in pending:
            consumer.seek(tp, beginnings[tp])
        out: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {sorted(pending)} did not finish in {timeout_s}s")
            for tp, records in consumer.poll(timeout_ms=200, max_records=10000).items():
                for r in records:
                    if r.offset < ends[tp]:
                        out.append(Record(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp))
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return out
    finally:
        consumer.close()
