"""Tweet views: users ⋈ tweets keyed by author, whichever side arrives first.

The wiring: topics, parsing, keying both sides by author (ROUTES), and the sink. The join is the
processor of a solution module (joinlab.solutions); `InMemory` runs it without Spark.
"""
from __future__ import annotations

import json
import os
from datetime import timedelta
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from joinlab import solutions
from joinlab.config import duration_ms
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import Pipeline, Tester, feed, last_by_version

USERS_TOPIC, TWEETS_TOPIC = "users", "tweets"
VIEWS_TOPIC, DEAD_LETTERS_TOPIC = "tweet-views", "tweet-views-dlq"
INPUT_TOPICS = [USERS_TOPIC, TWEETS_TOPIC]
OUTPUT_TOPICS = [VIEWS_TOPIC, DEAD_LETTERS_TOPIC]
SOLUTION, PROCESSORS = "jobs.tweet_views.solution", ("TweetViewsProcessor",)

_POSITIVE_VERSION = Check("version >= 1", lambda e: e["version"] >= 1, "invalid field: version (must be >= 1)")
USERS = EventSchema(USERS_TOPIC, {"user_id": "bigint", "name": "string", "handle": "string",
                                  "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))
TWEETS = EventSchema(TWEETS_TOPIC, {"tweet_id": "bigint", "user_id": "bigint", "text": "string",
                                    "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))

# Both sides grouped by author; kind says which side a row is.
ROUTES = [Route(USERS, "user", "user_id"), Route(TWEETS, "tweet", "user_id")]

# --- The processor's contract ------------------------------------------------------------------

def retention() -> timedelta:
    """How far (event time) behind the author's newest event an author's tweets are kept, and so
    still get the author's profile updates: $LAB_TWEET_VIEWS_RETENTION, default 30 days."""
    return timedelta(milliseconds=duration_ms(os.environ.get("LAB_TWEET_VIEWS_RETENTION", "30 days"),
                                              "LAB_TWEET_VIEWS_RETENTION"))


# One input row shape for both sides, grouped by author: kind is "user" or "tweet".
SIDE_COLUMNS = ["kind", "user_id", "version", "event_time", "tweet_id", "text", "name", "handle"]
# What the processor emits: one row per view.
VIEW = ("tweet_id bigint, tweet_version bigint, text string, tweet_time timestamp, "
        "user_id bigint, user_version bigint, name string, handle string, user_time timestamp")


def join_views(events: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: both sides grouped by author (`user_id`, keyed by parse_events),
    through the solution's processor."""
    processor = solutions.of(SOLUTION, PROCESSORS, solution).TweetViewsProcessor
    kind, _ = route_columns(ROUTES)
    sides = events.select(kind.alias("kind"), *SIDE_COLUMNS[1:])
    return sides.groupBy("user_id").transformWithState(processor(retention()), VIEW, "Append", "None")


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: views and dead letters."""
    parsed = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views",
                          key={"user_id": route_columns(ROUTES)[1]})
    views = join_views(parsed.events, solution)
    value = F.to_json(F.struct(
        "tweet_id",
        F.struct("tweet_id", F.col("tweet_version").alias("version"), "text",
                 F.col("tweet_time").alias("event_time")).alias("tweet"),
        F.struct("user_id", F.col("user_version").alias("version"), "name", "handle",
                 F.col("user_time").alias("event_time")).alias("author")))
    out = views.select(F.lit(VIEWS_TOPIC).alias("topic"), F.col("tweet_id").cast("string").alias("key"),
                       value.alias("value"))
    return out.unionByName(parsed.dead_letters)


class InMemory(Pipeline):
    """join_views through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        processor = solutions.of(SOLUTION, PROCESSORS, solution).TweetViewsProcessor
        self.views_processor = Tester(lambda: processor(retention()))

    def rows(self, records) -> list[Row]:
        """Valid input records as join_views' rows."""
        events = valid_events(records, [USERS, TWEETS])
        sides = [routed(ROUTES, schema, e, SIDE_COLUMNS) for schema, e in events]
        return [Row(**dict(side, event_time=moment(micros(side["event_time"])))) for side in sides]

    def batch(self, rows: list[Row]) -> list[Row]:
        return feed(self.views_processor, rows, lambda r: r.user_id)

    def views(self, out: list[Row]) -> dict:
        return last_by_version([r.asDict() for r in out], "tweet_id", version)


# --- Reading the output topic: what a consumer keeps ------------------------------------------

def view(tweet: dict, user: dict) -> dict:
    """One view, flat, with times as datetimes so that formatting never counts as a difference."""
    return {"tweet_id": tweet["tweet_id"], "tweet_version": tweet["version"], "text": tweet["text"],
            "tweet_time": parse_time(tweet["event_time"]), "user_id": user["user_id"],
            "user_version": user["version"], "name": user["name"], "handle": user["handle"],
            "user_time": parse_time(user["event_time"])}


def actual(records: list) -> dict[int, dict]:
    """The last view of each tweet on the output topic: the highest (tweet, author) versions."""
    bodies = [json.loads(r.value) for r in records if r.topic == VIEWS_TOPIC]
    return last_by_version([view(b["tweet"], b["author"]) for b in bodies], "tweet_id", version)


def version(v: dict) -> tuple[int, int]:
    return v["tweet_version"], v["user_version"]
