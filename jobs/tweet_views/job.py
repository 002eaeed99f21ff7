"""Tweet views: users ⋈ tweets keyed by author, whichever side arrives first.

The query, top down: the topics and their schemas; `build`, its heart: parse each record
(joinlab.kit.events), shuffle the events by author, group them by author through the processor
(solution.py), and write views and dead letters. Last, `query`, Kafka to Kafka, which runs it. The
row contract is given.py; the output as a consumer reads it, consumer.py; the stage in memory,
in_memory.py. One record's trip through it, its key and what each stage keeps: README.md, "One
record's trip".
"""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from jobs.tweet_views.given import EVENT_COLUMNS, VIEW, retention
from joinlab.kit import solutions
from joinlab.kit.events import Check, EventSchema, parse_events
from joinlab.kit.kafka import Kafka

USERS_TOPIC, TWEETS_TOPIC = "users", "tweets"
VIEWS_TOPIC, DEAD_LETTERS_TOPIC = "tweet-views", "tweet-views-dlq"
INPUT_TOPICS = [USERS_TOPIC, TWEETS_TOPIC]
OUTPUT_TOPICS = [VIEWS_TOPIC, DEAD_LETTERS_TOPIC]

_POSITIVE_VERSION = Check("version >= 1", lambda e: e["version"] >= 1, "invalid field: version (must be >= 1)")
USERS = EventSchema(USERS_TOPIC, {"user_id": "bigint", "name": "string", "handle": "string",
                                  "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))
TWEETS = EventSchema(TWEETS_TOPIC, {"tweet_id": "bigint", "user_id": "bigint", "text": "string",
                                    "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))

# The processor a solution module defines: the lab's (solution.py), or a candidate's of that name.
SOLUTION, PROCESSORS = "jobs.tweet_views.solution", ("TweetViewsProcessor",)


def output_records(views: DataFrame) -> DataFrame:
    """Rows of VIEW's columns as the output topic's records, keyed by tweet: one writer of the
    record's shape, so whatever else writes views (Spark's own join, in
    references/tweet_views_alternatives.py) is read back by `consumer.actual` exactly as the job's are."""
    value = F.to_json(F.struct(
        "tweet_id",
        F.struct("tweet_id", F.col("tweet_version").alias("version"), "text",
                 F.col("tweet_time").alias("event_time")).alias("tweet"),
        F.struct("user_id", F.col("user_version").alias("version"), "name", "handle",
                 F.col("user_time").alias("event_time")).alias("author")))
    return views.select(F.lit(VIEWS_TOPIC).alias("topic"), F.col("tweet_id").cast("string").alias("key"),
                        value.alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Kafka records in (the connector's columns), Kafka records (topic, key, value) out."""
    parsed = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views")
    by_author = parsed.shuffle({"user_id": F.col("user_id")})  # the query's one shuffle: the stage's key
    side = F.when(F.col("topic") == USERS_TOPIC, "user").when(F.col("topic") == TWEETS_TOPIC, "tweet")
    processors = solutions.of(SOLUTION, PROCESSORS, solution)  # the lab's, or a candidate's module
    views = (by_author.events.withColumn("side", side).select(*EVENT_COLUMNS)
             .groupBy("user_id")
             .transformWithState(processors.TweetViewsProcessor(retention()), VIEW, "Append", "None"))
    return output_records(views).unionByName(by_author.dead_letters)


def query(spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
    """The job: its topics read, `build`, the rows written to the topics they name."""
    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    out = build(kafka.incoming(raw), solution)
    return kafka.outgoing(out).writeStream.format("kafka").options(**kafka.sink()).outputMode("append")
