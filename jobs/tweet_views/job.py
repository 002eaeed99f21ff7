"""Tweet views: users ⋈ tweets keyed by author, whichever side arrives first.

The query first: both sides grouped by author through one stage, the solution's processor. Below
it: the topics and how records are parsed and keyed (ROUTES), the sink, the stage in memory, and
how a consumer reads the output. The row contract is given.py.
"""
from __future__ import annotations

import json
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.tweet_views.given import SIDE_COLUMNS, VIEW, retention
from joinlab import solutions
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import Chain, last_by_version
from joinlab.patterns import Interview
from joinlab.stages import Stage, chain, processors

STAGES = [Stage("by_author", "TweetViewsProcessor", ("user_id",), VIEW, make=lambda _: (retention(),))]


def join_views(events: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: both sides grouped by author (`user_id`, keyed by parse_events),
    through the solution's processor."""
    kind, _ = route_columns(ROUTES)
    sides = events.select(kind.alias("kind"), *SIDE_COLUMNS[1:])
    return chain(sides, STAGES, solutions.of(SOLUTION, PROCESSORS, solution))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: views and dead letters."""
    parsed = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views",
                          key={"user_id": route_columns(ROUTES)[1]})
    return view_records(join_views(parsed.events, solution)).unionByName(parsed.dead_letters)


def view_records(views: DataFrame) -> DataFrame:
    """Rows of VIEW's columns as the output topic's records, keyed by tweet: one writer of the
    record's shape, so whatever else writes views (Spark's own join, in
    references/tweet_views_alternatives.py) is read back by `actual` exactly as the job's are."""
    value = F.to_json(F.struct(
        "tweet_id",
        F.struct("tweet_id", F.col("tweet_version").alias("version"), "text",
                 F.col("tweet_time").alias("event_time")).alias("tweet"),
        F.struct("user_id", F.col("user_version").alias("version"), "name", "handle",
                 F.col("user_time").alias("event_time")).alias("author")))
    return views.select(F.lit(VIEWS_TOPIC).alias("topic"), F.col("tweet_id").cast("string").alias("key"),
                        value.alias("value"))


# --- The pattern's parts (joinlab.patterns.Job) ------------------------------------------------

USERS_TOPIC, TWEETS_TOPIC = "users", "tweets"
VIEWS_TOPIC, DEAD_LETTERS_TOPIC = "tweet-views", "tweet-views-dlq"
INPUT_TOPICS = [USERS_TOPIC, TWEETS_TOPIC]
OUTPUT_TOPICS = [VIEWS_TOPIC, DEAD_LETTERS_TOPIC]
SOLUTION, PROCESSORS, GIVEN = "jobs.tweet_views.solution", processors(STAGES), None
SPARK_CONF, LOOKUP, SETTINGS = {}, None, ("LAB_TWEET_VIEWS_RETENTION",)
INTERVIEW = Interview(level="1, warm-up", time_box="30-45 min", key="tweet")

_POSITIVE_VERSION = Check("version >= 1", lambda e: e["version"] >= 1, "invalid field: version (must be >= 1)")
USERS = EventSchema(USERS_TOPIC, {"user_id": "bigint", "name": "string", "handle": "string",
                                  "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))
TWEETS = EventSchema(TWEETS_TOPIC, {"tweet_id": "bigint", "user_id": "bigint", "text": "string",
                                    "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))

# Both sides grouped by author; kind says which side a row is.
ROUTES = [Route(USERS, "user", "user_id"), Route(TWEETS, "tweet", "user_id")]


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solutions.of(SOLUTION, PROCESSORS, solution))

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as the stage's rows."""
        sides = [routed(ROUTES, schema, e, SIDE_COLUMNS) for schema, e in valid_events(records, [USERS, TWEETS])]
        return [Row(**dict(side, event_time=moment(micros(side["event_time"])))) for side in sides]

    @staticmethod
    def views(out: list[Row]) -> dict:
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
