"""The official connector's options and columns, parsed once."""
from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

EARLIEST, LATEST = -2, -1  # the official connector's sentinels in JSON offsets

# A read task per topic-partition costs ~10-50 ms of scheduling and client set-up whatever its size;
# ranges together smaller than this many records share one task (see planning.plan_tasks).
TASK_RECORDS = 10_000

# How long the broker may hold a fetch that has too little data (Kafka's fetch.max.wait.ms; the
# official connector takes it as option kafka.fetch.max.wait.ms). A read task only asks for offsets
# it knows exist, so it never needs the broker to wait; but on the lab's broker the first fetch of
# each assigned range took the whole wait even with the records there: 51 ms per range at 50 ms
# (6 ranges: 310 ms per task), 1.5-2.6 ms at 1 ms (6 ranges: 12 ms). Measured in
# scripts/fetch_wait.py; `make bench` has it in the ablation. The same broker also stops looking
# for a fetch's records when the wait has passed, so a read raises it when it must
# (fetch.LONGER_WAIT_AFTER_S).
FETCH_WAIT_MS = 1

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def read_schema(include_headers: bool) -> StructType:
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _flag(options, name: str, default: bool) -> bool:
    return str(options.get(name, str(default))).strip().lower() == "true"


@dataclass(frozen=True)
class KafkaOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str
    ending_offsets: str
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_headers: bool
    sink_topic: str | None
    fetch_timeout_ms: int
    pooling: bool = True  # lab option joinlab.pooling: reuse clients across tasks (spark_kafka.pool)
    task_records: int = 0  # lab option joinlab.taskRecords: ranges smaller than this share a read task
    fetch_wait_ms: int = FETCH_WAIT_MS  # option kafka.fetch.max.wait.ms

    @classmethod
    def parse(cls, options) -> "KafkaOptions":
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' is required, e.g. 127.0.0.1:9092")
        topics = tuple(t.strip() for t in options.get("subscribe", "").split(",") if t.strip())
        limit = options.get("maxOffsetsPerTrigger")
        if limit is not None and int(limit) <= 0:
            raise ValueError(f"maxOffsetsPerTrigger must be a positive number, not {limit}")
        return cls(bootstrap, topics, options.get("startingOffsets", "latest"),
                   options.get("endingOffsets", "latest"), int(limit) if limit else None,
                   _flag(options, "failOnDataLoss", True), _flag(options, "includeHeaders", False),
                   options.get("topic"), int(options.get("kafkaConsumer.pollTimeoutMs", "120000")),
                   _flag(options, "joinlab.pooling", True), int(options.get("joinlab.taskRecords", TASK_RECORDS)),
                   int(options.get("kafka.fetch.max.wait.ms", FETCH_WAIT_MS)))

    def require_topics(self) -> None:
        if not self.topics:
            raise ValueError("option 'subscribe' is required: a comma-separated list of topics")


def parse_offsets_spec(spec: str) -> str | dict[str, dict[str, int]]:
    """'earliest', 'latest' or the official JSON form {"topic": {"0": 23, "1": -2}}."""
    text = spec.strip()
    if text in ("earliest", "latest"):
        return text
    try:
        parsed = json.loads(text)
        return {topic: {str(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}
    except (ValueError, AttributeError) as exc:
        raise ValueError(f"offsets must be 'earliest', 'latest' or JSON like "
                         f'{{"topic": {{"0": 23}}}}, not {spec!r}') from exc
