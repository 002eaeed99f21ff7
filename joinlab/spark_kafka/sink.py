"""Writing to Kafka from Spark with confluent-kafka: columns key, value, headers, topic (or the
'topic' option), partition (optional). A task returns only after every record is acknowledged
(flush before the task commits); any delivery error fails the task, so Spark retries the batch
(at-least-once, as the official sink). The producer is borrowed from the worker's pool
(joinlab.spark_kafka.pool): reused by the worker's next task unless this one failed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from joinlab.spark_kafka import pool
from joinlab.spark_kafka.options import KafkaOptions


@dataclass
class Written(WriterCommitMessage):
    records: int


def _check_schema(options: KafkaOptions, schema) -> None:
    names = set(schema.fieldNames())
    if "value" not in names:
        raise ValueError("the Kafka sink needs a 'value' column (string or binary)")
    if "topic" not in names and not options.sink_topic:
        raise ValueError("the Kafka sink needs a 'topic' column or the 'topic' option")


def _as_bytes(value):
    return value.encode() if isinstance(value, str) else value


def producer_config(options: KafkaOptions) -> dict:
    return {"bootstrap.servers": options.bootstrap_servers, "acks": "all", "linger.ms": 5,
            "batch.num.messages": 10000, "enable.idempotence": True}


class _Producer:
    """A confluent-kafka producer that remembers a fatal error (an idempotent producer that hit
    one can send nothing more): such a producer is closed, never returned to the pool."""

    def __init__(self, config: dict):
        from confluent_kafka import Producer
        self.fatal = None
        self.also = config.get("error_cb")  # the pool's: it closes an idle client whose brokers are gone
        self.client = Producer({**config, "error_cb": self._on_error})

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal = err
        if self.also is not None:
            self.also(err)

    def poll(self, timeout: float) -> int:
        return self.client.poll(timeout)

    def close(self) -> None:
        self.client.purge()  # records a failed task left queued are not sent after it failed
        self.client.flush(0)
        self.client.close()


def produce_batches(options: KafkaOptions, batches: Iterator[pa.RecordBatch]) -> Written:
    with pool.borrowed("producer", producer_config(options), _Producer, lambda p: p.fatal is None,
                       enabled=options.pooling) as pooled:
        return _produce(options, pooled, batches)


def _produce(options: KafkaOptions, pooled: _Producer, batches: Iterator[pa.RecordBatch]) -> Written:
    from confluent_kafka import KafkaException
    producer = pooled.client
    errors: list = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    count = 0
    for batch in batches:
        cols = batch.to_pydict()
        n = batch.num_rows
        values = cols["value"]
        keys = cols.get("key") or [None] * n
        topics = cols.get("topic") or [None] * n
        parts = cols.get("partition") or [None] * n
        headers = cols.get("headers") or [None] * n
        for i in range(n):
            topic = options.sink_topic if options.sink_topic else topics[i]
            if topic is None:
                raise ValueError("a row has no topic: set the 'topic' column or option")
            kwargs = {"key": _as_bytes(keys[i]), "value": _as_bytes(values[i]), "on_delivery": on_delivery}
            if parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], _as_bytes(h["value"])) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
    remaining = producer.flush(60)
    if errors or pooled.fatal is not None:
        raise KafkaException(errors[0] if errors else pooled.fatal)
    if remaining:
        raise TimeoutError(f"{remaining} records were not acknowledged within 60 s")
    return Written(count)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: KafkaOptions, schema):
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator):
        return produce_batches(self.options, iterator)


class KafkaBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: KafkaOptions, schema):
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator):
        return produce_batches(self.options, iterator)
