"""Records through a job's query on a Spark session, one micro-batch per list of records, with no
broker: the grader's fast stage for a pattern whose join is Spark's own (it has no processor to
drive through TwsTester), and Spark's built-in joins scored on a pattern's events.

Each list is one file of a file source read one file per trigger, shaped as the Kafka connector's
rows; after each, `processAllAvailable` returns once Spark has also run the no-data batch that the
new watermark calls for (state dropped, outer rows emitted), as a running query does when its
input pauses. The output goes to the memory sink.
"""
from __future__ import annotations

import base64
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from joinlab.config import lab_home, participant
from joinlab.runner import checkpoint_dir, session_conf

_RAW = "topic string, key string, value string, partition int, offset bigint, timestamp_ms bigint"
_names = itertools.count()


def run(spark: SparkSession, build: Callable[[DataFrame], DataFrame], batches: Sequence[Sequence],
        partitions: int = 1) -> list[Row]:
    """`build` (raw Kafka-shaped rows in, sink rows out) over `batches` of records (topic, key and
    value as bytes; a Kafka timestamp_ms where they have one, else now), in order; every output row."""
    # Under LAB_HOME, which the client and the Spark server share (in Compose, a volume): the
    # server reads these files and writes the checkpoint. In a room the server runs as another user:
    # the folder is one it may write in, and what it wrote there is its own to delete, not ours (a
    # TemporaryDirectory's clean-up raises on those files even when told to ignore errors).
    tmp = checkpoint_dir(tempfile.mkdtemp(prefix="microbatch-", dir=lab_home()))
    try:
        source, name = Path(tmp, "in"), f"microbatch_{next(_names)}"  # a view of this session's: no '.'
        source.mkdir()
        raw = (spark.readStream.schema(_RAW).option("maxFilesPerTrigger", 1).json(str(source))
               .select("topic", F.unbase64("key").alias("key"), F.unbase64("value").alias("value"),
                       "partition", "offset", F.timestamp_millis("timestamp_ms").alias("timestamp")))
        with session_conf(spark, {"spark.sql.shuffle.partitions": str(partitions)}):
            query = (build(raw).writeStream.format("memory").queryName(name).outputMode("append")
                     .option("checkpointLocation", str(Path(tmp, "checkpoint"))).start())
        try:
            offset = 0
            for number, batch in enumerate(batches):
                lines = [_line(record, offset + i) for i, record in enumerate(batch)]
                offset += len(lines)
                part = Path(tmp, f"{number:06d}.json")
                part.write_text("".join(lines))
                part.rename(source / part.name)  # whole, or not at all, when the source lists it
                query.processAllAvailable()
            return spark.table(name).collect()
        finally:
            query.stop()
            spark.catalog.dropTempView(name)
    finally:
        shutil.rmtree(tmp, ignore_errors=bool(participant()))


def _line(record, offset: int) -> str:
    def b64(data):
        return None if data is None else base64.b64encode(data).decode()
    produced = getattr(record, "timestamp_ms", None) or int(time.time() * 1000)
    return json.dumps({"topic": record.topic, "key": b64(record.key), "value": b64(record.value), "partition": 0,
                       "offset": offset, "timestamp_ms": produced}) + "\n"


def on_records_alone() -> list[str]:
    """The registered patterns whose job runs on its records alone: not one that asks the lookup
    service, which needs the service and its topic."""
    from joinlab import patterns
    return [name for name in patterns.PATTERNS if patterns.job(name).LOOKUP is None]


def every_pattern(spark: SparkSession, count: int) -> None:
    """Each of those patterns' queries once, on `count` generated records in two micro-batches:
    what loads and compiles a JVM's classes for them (the class archive's training, perf.connect_soak)."""
    from joinlab import patterns
    for name in on_records_alone():
        records = patterns.generator(name).generate(1, count)
        run(spark, patterns.job(name).build, [records[:count // 2], records[count // 2:]])
