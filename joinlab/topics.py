"""Plain-client Kafka helpers on kafka-python: topics, end offsets, reading a topic whole, a
participant's topic names (`own`), and looking at topics (`list_topics`, `tail`, `describe`:
`joinlab topics list|tail`)."""
from __future__ import annotations

import json
import time
from contextlib import closing, suppress
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (ClusterAuthorizationFailedError, KafkaError, TopicAlreadyExistsError,
                          TopicAuthorizationFailedError)

from joinlab.config import topic_partitions, topic_prefix
from joinlab.kafka_settings import KafkaAccessError, client_config, explain


@dataclass(frozen=True)
class Consumed:
    """A record read back from the broker (a record to produce is joinlab.generate.Record)."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


# --- A participant's topics --------------------------------------------------------------------
# In a room (LAB_PARTICIPANT set) every participant's topics are the pattern's topics with their
# name in front, `alice.tweets`: the job, generator, verify, `joinlab topics` and the notebook's Lab
# name the topics they create, write and read through `own`, and hand records on under the
# pattern's names (`named`), which is what a job's `build`, a reference and `actual` read.

def own(topic: str) -> str:
    """The name a pattern's topic (or a prefix of topic names) has on the broker for this
    participant: config.topic_prefix() before it; the name itself without a participant."""
    return topic_prefix() + topic


def owned(topics: Iterable[str]) -> list[str]:
    return [own(topic) for topic in topics]


def addressed(records: Iterable) -> Iterator:
    """`records` (joinlab.generate's, with the pattern's topic names) to this participant's topics,
    lazily, one by one as they are sent."""
    prefix = topic_prefix()
    return iter(records) if not prefix else (replace(r, topic=prefix + r.topic) for r in records)


def named(records: Iterable[Consumed]) -> list[Consumed]:
    """Records read from this participant's topics, named as the pattern names its topics."""
    prefix = topic_prefix()
    return [replace(r, topic=r.topic.removeprefix(prefix)) if prefix else r for r in records]


def read_own(bootstrap: str, topics: Iterable[str], upto: dict | None = None) -> list[Consumed]:
    """`read_topics` of this participant's `topics` (the pattern's names), named as the pattern names them."""
    return named(read_topics(bootstrap, owned(topics), upto))


# Every kafka-python client of the lab is made here (and broker.answers_as), with the lab's Kafka
# settings (joinlab.kafka_settings: security, credentials, client id) and a bootstrap that gives up
# within BOOTSTRAP_TIMEOUT_MS: a broker that refuses the credentials or whose certificate is not
# trusted is said in a line (kafka_settings.explain), not retried for half a minute.
BOOTSTRAP_TIMEOUT_MS = 10000


def _made(kind, **config):
    """A kafka-python client of `kind` with the lab's settings under `config`; a KafkaAccessError
    that says why in a line when it cannot reach the brokers."""
    try:
        return kind(**{"bootstrap_timeout_ms": BOOTSTRAP_TIMEOUT_MS, **client_config(), **config})
    except KafkaError as exc:
        if (line := explain(exc, config.get("bootstrap_servers"))) is None:
            raise
        raise KafkaAccessError(line) from None


def plain_consumer(bootstrap: str) -> KafkaConsumer:
    """A consumer for manual assignment: no group (a group join costs ~half the session timeout)."""
    return _made(KafkaConsumer, bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                 consumer_timeout_ms=1000, request_timeout_ms=30000)


def producer(bootstrap: str, **overrides) -> KafkaProducer:
    return _made(KafkaProducer, **{"bootstrap_servers": bootstrap, "linger_ms": 20, "acks": "all",
                                   "batch_size": 64 * 1024, **overrides})


def admin_client(bootstrap: str, **overrides) -> KafkaAdminClient:
    return _made(KafkaAdminClient, bootstrap_servers=bootstrap, **overrides)


def create_topics(bootstrap: str, names: Iterable[str], partitions: int | None = None) -> list[str]:
    """Create the topics that do not exist yet and wait (up to 30 s) until their metadata is visible;
    returns those it created (the lab deletes no other: stack.lab.warm). Only the missing ones: a
    user without CREATE runs on topics an admin made beforehand (a topic the user may not DESCRIBE
    looks missing, and its creation is refused with what to ask for). Their replication factor is
    the broker's (default.replication.factor)."""
    names = set(names)
    with closing(admin_client(bootstrap)) as admin:
        missing = names - set(admin.list_topics())
        if missing:
            try:
                with suppress(TopicAlreadyExistsError):  # another client created it meanwhile
                    admin.create_topics([NewTopic(n, partitions or topic_partitions(), -1) for n in sorted(missing)])
            except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError):
                raise KafkaAccessError(
                    f"Kafka at {bootstrap} refused to create the topics {', '.join(sorted(missing))} "
                    f"(TopicAuthorizationFailed): this user lacks the ACL CREATE on them (or on the cluster), "
                    f"or DESCRIBE if they exist. Have an admin create them ({partitions or topic_partitions()} "
                    f"partitions each) and grant this user DESCRIBE, READ and WRITE on them, or grant CREATE "
                    f"(docs/operations.md#your-own-kafka).") from None
        deadline = time.monotonic() + 30
        while not names <= set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {sorted(names)} not visible after 30s")
            time.sleep(0.05)
    return sorted(missing)


def delete_topics(bootstrap: str, names: Iterable[str]) -> None:
    """Delete those of the topics that exist and wait (up to 30 s) until they are no longer listed."""
    names = set(names)
    with closing(admin_client(bootstrap)) as admin:
        if existing := sorted(names & set(admin.list_topics())):
            admin.delete_topics(existing)
        deadline = time.monotonic() + 30
        while names & set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics {sorted(names & set(admin.list_topics()))} still listed after 30s")
            time.sleep(0.05)


def partitions_of(consumer: KafkaConsumer, topics: Iterable[str]) -> list[TopicPartition]:
    """Each topic's partitions (none for a topic that does not exist: the client asks the broker for
    a topic it does not know yet before it says so)."""
    return [TopicPartition(topic, p) for topic in topics for p in sorted(consumer.partitions_for_topic(topic))]


def end_offsets(consumer: KafkaConsumer, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """The next offset of each partition (its log end)."""
    return dict(consumer.end_offsets(tps)) if tps else {}


def records_on(bootstrap: str, topics: Iterable[str]) -> int:
    """Records written so far to `topics` (their end offsets; a topic that does not exist has none)."""
    with closing(plain_consumer(bootstrap)) as consumer:
        return sum(end_offsets(consumer, partitions_of(consumer, topics)).values())


def read_topics(bootstrap: str, topics: Iterable[str], upto: dict | None = None) -> list[Consumed]:
    """Every record of `topics`, from the beginning to the true end at call time, or to the offsets
    `upto` ({topic: {partition: offset}}, as Spark's Kafka source gives them) where it names one."""
    with closing(plain_consumer(bootstrap)) as consumer:
        tps = partitions_of(consumer, topics)
        ends = end_offsets(consumer, tps)
        if upto is not None:
            ends = {tp: min(end, int(upto.get(tp.topic, {}).get(str(tp.partition), end))) for tp, end in ends.items()}
        return _read(consumer, consumer.beginning_offsets(tps), ends, timeout_s=120)


def _read(consumer: KafkaConsumer, starts: dict[TopicPartition, int], ends: dict[TopicPartition, int],
          timeout_s: float) -> list[Consumed]:
    """The records of each partition from its start up to (not including) its end offset."""
    consumer.assign(list(starts))
    for tp, start in starts.items():
        consumer.seek(tp, start)
    pending = {tp for tp, start in starts.items() if ends[tp] > start}
    out: list[Consumed] = []
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {sorted(pending)} did not finish in {timeout_s}s")
        for tp, records in consumer.poll(timeout_ms=200, max_records=10000).items():
            out += [_record(r) for r in records if r.offset < ends[tp]]
            if consumer.position(tp) >= ends[tp]:
                pending.discard(tp)
    return out


# --- Looking at topics: `joinlab topics list` and `joinlab topics tail` ---------------------------

@dataclass(frozen=True)
class TopicSize:
    topic: str
    partitions: int
    records: int  # end minus beginning offsets, summed over the partitions


def list_topics(bootstrap: str) -> list[TopicSize]:
    """Every topic but Kafka's internal ones (`__...`), by name, with its partitions and records."""
    with closing(plain_consumer(bootstrap)) as consumer:
        names = sorted(t for t in consumer.topics() if not t.startswith("__"))
        tps = partitions_of(consumer, names)
        beginnings = consumer.beginning_offsets(tps)
        ends = end_offsets(consumer, tps)
        return [TopicSize(name, sum(1 for tp in tps if tp.topic == name),
                          sum(ends[tp] - beginnings[tp] for tp in tps if tp.topic == name)) for name in names]


class NoSuchTopic(LookupError):
    pass


def tail(bootstrap: str, topic: str, n: int = 10, from_beginning: bool = False,
         follow: bool = False) -> Iterator[Consumed]:
    """The last `n` records of `topic` (every record with `from_beginning`), oldest first by Kafka
    timestamp across partitions; with `follow`, then every new record as it arrives (until the
    caller stops iterating)."""
    with closing(plain_consumer(bootstrap)) as consumer:
        if topic not in consumer.topics():
            known = ", ".join(sorted(t for t in consumer.topics() if not t.startswith("__")
                                     and t.startswith(topic_prefix()))) or "none"  # a participant's own
            hidden = " (or one this user may not see: it needs the ACL DESCRIBE on it)" if client_config() else ""
            raise NoSuchTopic(f"no topic {topic!r} at {bootstrap}{hidden}; topics there: {known}")
        tps = partitions_of(consumer, [topic])
        beginnings = consumer.beginning_offsets(tps)
        ends = end_offsets(consumer, tps)
        starts = {tp: beginnings[tp] if from_beginning else max(beginnings[tp], ends[tp] - n) for tp in tps}
        history = _read(consumer, starts, ends, timeout_s=60)
        history.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
        yield from history if from_beginning else history[-n:]  # n <= 0 read nothing: history is []
        if not follow:
            return
        for tp in tps:  # from the end seen above on: records past it were not printed yet
            consumer.seek(tp, ends[tp])
        while True:
            for records in consumer.poll(timeout_ms=500).values():
                yield from map(_record, records)


def _record(r) -> Consumed:
    return Consumed(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)


def describe(record: Consumed, compact: bool = False) -> str:
    """A record for a person: where it is and when, its key, then its value as indented JSON
    (one line with `compact`); a dead letter leads with its reason and the record it rejected."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.timestamp_ms / 1000))
    key = "null" if record.key is None else record.key.decode("utf-8", "replace")
    head = (f"{record.topic}  partition {record.partition}  offset {record.offset}  "
            f"{when}.{record.timestamp_ms % 1000:03d} UTC  key {key}")
    if record.value is None:
        return f"{head}\n  (no value: a tombstone)"
    try:
        value = json.loads(record.value)
    except (UnicodeDecodeError, ValueError):
        return f"{head}\n  (not JSON) {record.value.decode('utf-8', 'replace')}"
    if isinstance(value, dict) and {"reason", "source_topic", "source_offset"} <= value.keys():
        return (f"{head}\n  DEAD LETTER  {value['reason']}  (from {value['source_topic']} partition "
                f"{value.get('source_partition')} offset {value['source_offset']}, job {value.get('job')})\n"
                f"  rejected value: {value.get('value')}")
    text = json.dumps(value, ensure_ascii=False, indent=None if compact else 2)
    return f"{head}\n  " + text.replace("\n", "\n  ")
