"""Ad clicks: each impression with its click, or alone once no click can come, through Spark's own
stream-stream join (a left outer join, watermarks on both sides, an event-time range in the
condition).

The query, top down: the topics and their schemas; `build`, its heart: parse each record
(joinlab.kit.events), shuffle the events by impression, split them into the two sides, join them on
the solution's watermarks and condition (solution.py), and write views and dead letters. Last,
`query`, Kafka to Kafka, which runs it. The row contract and the rules are given.py; the output as a
consumer reads it, consumer.py; the query in memory, in_memory.py. One record's trip through it, its
key and what each stage keeps: README.md, "One record's trip".
"""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from joinlab.kit import solutions
from joinlab.kit.events import Check, EventSchema, parse_events
from joinlab.kit.kafka import Kafka

IMPRESSIONS_TOPIC, CLICKS_TOPIC = "impressions", "clicks"
OUTPUT_TOPIC, DEAD_LETTERS_TOPIC = "ad-clicks", "ad-clicks-dlq"
INPUT_TOPICS = [IMPRESSIONS_TOPIC, CLICKS_TOPIC]
OUTPUT_TOPICS = [OUTPUT_TOPIC, DEAD_LETTERS_TOPIC]

_POSITIVE_ID = Check("impression_id >= 1", lambda e: e["impression_id"] >= 1,
                     "invalid field: impression_id (must be >= 1)")
IMPRESSIONS = EventSchema(IMPRESSIONS_TOPIC, {"impression_id": "bigint", "ad_id": "bigint", "placement": "string",
                                              "event_time": "timestamp"}, checks=(_POSITIVE_ID,))
CLICKS = EventSchema(CLICKS_TOPIC, {"click_id": "bigint", "impression_id": "bigint", "event_time": "timestamp"},
                     checks=(_POSITIVE_ID,))

# No processor: the join and its state are Spark's own. A solution module defines the two parts of
# the join a candidate writes (solution.py, or a candidate's module of those names).
SOLUTION, PROCESSORS = "jobs.ad_clicks.solution", ("with_watermarks", "join_condition")


def output_records(views: DataFrame) -> DataFrame:
    """Views (VIEW's columns, given.py) as the output topic's records, keyed by impression."""
    value = F.to_json(F.struct(*views.columns), {"ignoreNullFields": "false"})
    return views.select(F.lit(OUTPUT_TOPIC).alias("topic"), F.col("impression_id").cast("string").alias("key"),
                        value.alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Kafka records in (the connector's columns), Kafka records (topic, key, value) out."""
    parsed = parse_events(raw, [IMPRESSIONS, CLICKS], DEAD_LETTERS_TOPIC, job="ad-clicks")
    # The query's first shuffle, by impression: both sides and the dead letters read it, so Kafka is
    # read once per micro-batch (the join then shuffles each side by its key after its watermark).
    # Its column has a name of its own: the two sides are a self-join of one frame, whose right side
    # Spark renames, and a column named like a field would then differ between the two copies.
    by_impression = parsed.shuffle({"shuffled_by": F.col("impression_id")})
    events = by_impression.events
    impressions = events.where(F.col("topic") == IMPRESSIONS_TOPIC).select(
        "impression_id", "ad_id", "placement", F.col("event_time").alias("impression_time"))
    clicks = events.where(F.col("topic") == CLICKS_TOPIC).select(
        "click_id", F.col("impression_id").alias("click_impression_id"), F.col("event_time").alias("click_time"))
    parts = solutions.of(SOLUTION, PROCESSORS, solution)  # the lab's, or a candidate's module
    impressions, clicks = parts.with_watermarks(impressions, clicks)
    views = (impressions.join(clicks, parts.join_condition(impressions, clicks), "leftOuter")
             .select("impression_id", "ad_id", "placement", "impression_time", "click_id", "click_time"))
    return output_records(views).unionByName(by_impression.dead_letters)


def query(spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
    """The job: its topics read, `build`, the rows written to the topics they name."""
    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    out = build(kafka.incoming(raw), solution)
    return kafka.outgoing(out).writeStream.format("kafka").options(**kafka.sink()).outputMode("append")
