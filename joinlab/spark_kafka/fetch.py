"""The executor data path: read exactly [start, end) of one partition with confluent-kafka and hand
it to Spark as Arrow record batches. confluent-kafka (librdkafka) is used here because it is the
fastest Python client by measurement (`make bench`); the lab's admin code uses kafka-python.

A task yields every record in its range or raises, never silently less. Offsets missing inside
the range (transaction markers, compaction) are not data loss; a range that starts before the log
start (records deleted) is, and fails the task unless failOnDataLoss=false.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Iterator

import pyarrow as pa

from joinlab.spark_kafka import pool
from joinlab.spark_kafka.continuity import DataLossError, Loss, message
from joinlab.spark_kafka.options import KafkaOptions
from joinlab.spark_kafka.planning import OffsetRange, ReadTask

BATCH_ROWS = 8192

# The embedded broker (Tansu's in-memory store) lists every stored batch of a partition on each
# fetch and stops listing when the fetch's wait has passed: offsets it did not reach get no records
# and no error, so with the 1 ms wait a partition's tail goes unreadable after ~2,000 produce
# batches. A read whose broker answers without records for LONGER_WAIT_AFTER_S although it reports
# more asks again with twice the wait, up to MAX_FETCH_WAIT_MS; this process keeps the longer wait
# for that broker, so reads stay fast until the broker needs more time.
LONGER_WAIT_AFTER_S = 0.5
MAX_FETCH_WAIT_MS = 500  # librdkafka's default
_fetch_wait_ms: dict[str, int] = {}  # bootstrap servers -> the wait this process learned it needs


class _NeedsLongerWait(Exception):
    def __init__(self, next_offset: int):
        super().__init__(next_offset)
        self.next_offset = next_offset


def fetch_wait_ms(options: KafkaOptions) -> int:
    return max(options.fetch_wait_ms, _fetch_wait_ms.get(options.bootstrap_servers, 0))


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
              ("partition", pa.int32()), ("offset", pa.int64()),
              ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)


def consumer_config(options: KafkaOptions) -> dict:
    return {
        "bootstrap.servers": options.bootstrap_servers,
        "group.id": "joinlab-spark-reader",  # required by librdkafka; never joined (we assign)
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",  # a start below the log start must surface, not be skipped
        "fetch.wait.max.ms": fetch_wait_ms(options),  # see options.FETCH_WAIT_MS, LONGER_WAIT_AFTER_S
        "queued.max.messages.kbytes": 65536,
    }


def _new_consumer(config: dict):
    from confluent_kafka import Consumer
    return Consumer(config)


class _Batch:
    def __init__(self, options: KafkaOptions):
        self.include_headers = options.include_headers
        self.schema = _arrow_schema(options.include_headers)
        self.clear()

    def clear(self) -> None:
        self.keys, self.values, self.offsets, self.times, self.types, self.headers = [], [], [], [], [], []

    def add(self, msg) -> None:
        self.keys.append(msg.key())
        self.values.append(msg.value())
        self.offsets.append(msg.offset())
        ts_type, ts_ms = msg.timestamp()
        self.times.append(ts_ms * 1000 if ts_ms >= 0 else None)
        self.types.append(max(ts_type - 1, 0))  # librdkafka: 1 create time, 2 log append; Kafka: 0, 1
        if self.include_headers:
            self.headers.append([{"key": k, "value": v} for k, v in (msg.headers() or [])])

    def to_arrow(self, topic: str, partition: int) -> pa.RecordBatch:
        n = len(self.offsets)
        columns = [pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
                   pa.array([topic] * n, pa.string()), pa.array([partition] * n, pa.int32()),
                   pa.array(self.offsets, pa.int64()), pa.array(self.times, pa.timestamp("us", tz="UTC")),
                   pa.array(self.types, pa.int32())]
        if self.include_headers:
            columns.append(pa.array(self.headers, self.schema.field("headers").type))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self.clear()
        return batch


def read_task(options: KafkaOptions, task: ReadTask) -> Iterator[pa.RecordBatch]:
    """All records of the task's ranges, in order, with one consumer borrowed from the worker's
    pool (joinlab.spark_kafka.pool): returned unassigned after the task, closed if it failed."""
    ranges = list(task.ranges)
    while ranges:
        with pool.borrowed("consumer", consumer_config(options), _new_consumer, enabled=options.pooling) as consumer:
            try:
                while ranges:
                    yield from read_range(options, ranges[0], consumer)
                    ranges.pop(0)
            except _NeedsLongerWait as stalled:  # the rest of the range, with a consumer that waits longer
                ranges[0] = dataclasses.replace(ranges[0], start=stalled.next_offset)
                _fetch_wait_ms[options.bootstrap_servers] = min(MAX_FETCH_WAIT_MS, 2 * fetch_wait_ms(options))
            finally:
                consumer.unassign()  # no prefetching between tasks; the next task assigns its own ranges


def read_range(options: KafkaOptions, rng: OffsetRange, consumer) -> Iterator[pa.RecordBatch]:
    """All records of `rng` as Arrow batches; raises if the range cannot be read whole."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    if rng.size <= 0:
        return
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    batch, next_offset = _Batch(options), rng.start
    stalled_since = time.monotonic()
    while next_offset < rng.end:
        messages = consumer.consume(num_messages=min(BATCH_ROWS, rng.end - next_offset), timeout=0.5)
        progressed = False
        for msg in messages:
            if msg.topic() != rng.topic or msg.partition() != rng.partition:
                continue  # the reused consumer's previous assignment: never part of this range
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= rng.end:  # only markers were left in the range
                        next_offset = rng.end
                    elif _log_shrank(consumer, options, rng):  # carrying on: the rest is gone
                        next_offset = rng.end
                    continue
                if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                    next_offset = _skip_lost(consumer, options, rng, next_offset)
                    progressed = True
                    continue
                raise KafkaException(err)
            offset = msg.offset()
            if offset >= rng.end:
                next_offset = rng.end
                break
            if offset >= next_offset:
                batch.add(msg)
                next_offset = offset + 1
                progressed = True
        if len(batch.offsets) >= BATCH_ROWS or (next_offset >= rng.end and batch.offsets):
            yield batch.to_arrow(rng.topic, rng.partition)
        if progressed:
            stalled_since = time.monotonic()
        elif (time.monotonic() - stalled_since > LONGER_WAIT_AFTER_S and next_offset < rng.end
              and fetch_wait_ms(options) < MAX_FETCH_WAIT_MS and _answered_empty(consumer, rng, next_offset)):
            if batch.offsets:  # what was read is handed on; the retry starts after it
                yield batch.to_arrow(rng.topic, rng.partition)
            raise _NeedsLongerWait(next_offset)
        elif time.monotonic() - stalled_since > options.fetch_timeout_ms / 1000:
            raise TimeoutError(f"reading {rng.topic}-{rng.partition} [{rng.start}, {rng.end}) stalled at "
                               f"offset {next_offset} for {options.fetch_timeout_ms} ms")
    if batch.offsets:
        yield batch.to_arrow(rng.topic, rng.partition)


def _fetched_end(consumer, rng: OffsetRange) -> int:
    """The partition's end (high watermark) as the broker's last fetch answer gave it, cached by
    librdkafka; -1001 before any answer. On the embedded broker it is right where ListOffsets
    under-reports (joinlab.topics)."""
    from confluent_kafka import TopicPartition
    return consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition), cached=True)[1]


def _answered_empty(consumer, rng: OffsetRange, next_offset: int) -> bool:
    """The broker answered fetches without records although it says the partition holds more (a
    slow connection or start-up never counts: no answer yet means no end)."""
    return _fetched_end(consumer, rng) > next_offset


def _log_shrank(consumer, options: KafkaOptions, rng: OffsetRange) -> bool:
    """At the end of the partition before the end of the range: normally the records are still on
    their way; but when the broker says the partition now ends before the range (restarted, topic
    recreated), they never come. Fail (default), or True: stop reading this range."""
    from confluent_kafka import TopicPartition
    low, listed = consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition), timeout=10, cached=False)
    high = max(listed, _fetched_end(consumer, rng))  # ListOffsets may under-report; the fetch's end is right
    if high >= rng.end:
        return False
    if options.fail_on_data_loss:
        raise DataLossError(message([Loss(rng.topic, str(rng.partition), rng.end, low, high)], None, None))
    return True


def _skip_lost(consumer, options: KafkaOptions, rng: OffsetRange, next_offset: int) -> int:
    """The range starts outside the log (below its start: deleted; past its end: the offsets went
    backwards): fail (default) or continue from the log start."""
    from confluent_kafka import TopicPartition
    low, high = consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition), timeout=10)
    if options.fail_on_data_loss or low <= next_offset:
        raise DataLossError(message([Loss(rng.topic, str(rng.partition), next_offset, low, high)], None, None))
    resume = min(low, rng.end)
    if resume < rng.end:
        consumer.assign([TopicPartition(rng.topic, rng.partition, resume)])
    return resume
