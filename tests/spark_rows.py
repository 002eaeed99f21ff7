"""A streaming source over in-memory records, with the Kafka source's columns.

A pattern's `build(raw)` then runs on a test's rows exactly as it runs on live topics: the same
parsing, the same stages, in a real streaming query, with watermarks, state and timers.

    raw = read_records(spark, records, batches=3)   # e.g. a generator's list of Records
    query = (job.build(raw).writeStream.format("memory").queryName("out")
             .option("checkpointLocation", cp).trigger(availableNow=True).start())

Why a streaming source: event-time operators run only in a streaming query. On a batch
DataFrame Spark refuses `withWatermark` followed by chained `transformWithState`
(CANNOT_ASSIGN_EVENT_TIME_COLUMN_WITHOUT_WATERMARK). Scala has MemoryStream for this; PySpark has
nothing like it, so this is one on the Python Data Source API.

The records arrive in `batches` chunks of their list order, one chunk per micro-batch, as a live
job reads what has arrived between two triggers. So a test controls the micro-batch boundaries
and therefore the watermark of each batch. Offsets are `{"batch": chunks read}`. Columns are
those of the Kafka source. Partitions are assigned by key (`partitions` per topic, default 1), and
offsets count per topic-partition in list order. `timestamp` is when the records were handed to
the source (`encode`) plus the record's position in the list in milliseconds: the arrival order,
as the batch references read it, at a time the events' own times are not in the future of (the
watermark guard in joinlab.kit.events).
"""
from __future__ import annotations

import base64
import json
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)


NAME = "labrows"
# The columns of Spark's Kafka source (without headers).
KAFKA_COLUMNS = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                            StructField("timestampType", IntegerType())])
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def encode(records: Iterable, batches: int = 1, partitions: int = 1) -> dict[str, str]:
    """The source's options for `records` (anything with .topic, .key and .value bytes)."""
    rows = [[r.topic, _b64(r.key), _b64(r.value)] for r in records]
    if batches < 1 or partitions < 1:
        raise ValueError(f"batches and partitions must be >= 1, got {batches} and {partitions}")
    return {"records": json.dumps(rows), "batches": str(batches), "partitions": str(partitions),
            "produced_ms": str(int(time.time() * 1000))}


@dataclass(frozen=True)
class Chunk(InputPartition):
    """The records of one topic-partition in one micro-batch: (key, value, offset, position)."""
    topic: str
    partition: int
    rows: tuple


def plan(rows: list, batches: int, partitions: int) -> list[list[Chunk]]:
    """Per micro-batch, one Chunk per non-empty topic-partition. Deterministic, so a replayed
    micro-batch reads exactly the same records."""
    size = max(1, -(-len(rows) // batches))
    next_offset: dict[tuple[str, int], int] = {}
    planned = []
    for first in range(0, len(rows), size):
        parts: dict[tuple[str, int], list] = {}
        for position in range(first, min(first + size, len(rows))):
            topic, key, value = rows[position]
            partition = zlib.crc32(_unb64(key) or b"") % partitions
            offset = next_offset.get((topic, partition), 0)
            next_offset[(topic, partition)] = offset + 1
            parts.setdefault((topic, partition), []).append((key, value, offset, position))
        planned.append([Chunk(t, p, tuple(found)) for (t, p), found in sorted(parts.items())])
    return planned


class RecordsDataSource(DataSource):
    """In-memory records as a stream with the Kafka source's columns (options: see `encode`)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self):
        return KAFKA_COLUMNS

    def streamReader(self, schema):
        return RecordsStreamReader(self.options)


class RecordsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch i reads chunk i: each call of latestOffset lets one more chunk arrive."""

    def __init__(self, options):
        rows = json.loads(options.get("records", "[]"))
        self.chunks = plan(rows, int(options.get("batches", "1")), int(options.get("partitions", "1")))
        self.produced = EPOCH + timedelta(milliseconds=int(options.get("produced_ms", "0")))

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self, start: dict, limit) -> dict:
        return {"batch": min(start["batch"] + 1, len(self.chunks))}

    def prepareForTriggerAvailableNow(self) -> None:
        pass  # every chunk is there already: latestOffset reaches the last one, then stays

    def partitions(self, start: dict, end: dict) -> Sequence[Chunk]:
        return [chunk for batch in range(start["batch"], end["batch"]) for chunk in self.chunks[batch]]

    def read(self, partition: Chunk):
        for key, value, offset, position in partition.rows:
            yield (_unb64(key), _unb64(value), partition.topic, partition.partition, offset,
                   self.produced + timedelta(milliseconds=position), 0)


def read_records(spark: SparkSession, records: Iterable, batches: int = 1, partitions: int = 1) -> DataFrame:
    """A streaming DataFrame with the Kafka source's columns over `records`, in `batches`
    micro-batches of their list order."""
    spark.dataSource.register(RecordsDataSource)
    return spark.readStream.format(NAME).options(**encode(records, batches, partitions)).load()
