"""Tweet views: users ⋈ tweets keyed by author, whichever side arrives first.

A record's trip, top down: the topics and their schemas; the one stage, grouped by author; what
goes to the output topic; then `build`, which parses each record (joinlab.events), shuffles the
events by author, runs them through the stage and writes views and dead letters. Below it: the
output as a consumer reads it, and the stage in memory. The row contract is given.py.
"""
from __future__ import annotations

import json
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.tweet_views.given import EVENT_COLUMNS, VIEW, retention
from joinlab.events import Check, EventSchema, micros, moment, parse_events, parse_time, valid_events
from joinlab.in_memory import Chain, last_by_version
from joinlab.patterns import Interview
from joinlab.stages import Stage, chain, processors

# --- What it reads ------------------------------------------------------------------------------

USERS_TOPIC, TWEETS_TOPIC = "users", "tweets"
VIEWS_TOPIC, DEAD_LETTERS_TOPIC = "tweet-views", "tweet-views-dlq"
INPUT_TOPICS = [USERS_TOPIC, TWEETS_TOPIC]
OUTPUT_TOPICS = [VIEWS_TOPIC, DEAD_LETTERS_TOPIC]

_POSITIVE_VERSION = Check("version >= 1", lambda e: e["version"] >= 1, "invalid field: version (must be >= 1)")
USERS = EventSchema(USERS_TOPIC, {"user_id": "bigint", "name": "string", "handle": "string",
                                  "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))
TWEETS = EventSchema(TWEETS_TOPIC, {"tweet_id": "bigint", "user_id": "bigint", "text": "string",
                                    "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))

# --- How it keys, and its stage -----------------------------------------------------------------

# Both sides by author: a user by their user_id, a tweet by its author's. A row's side is its topic's.
SIDES = {USERS_TOPIC: "user", TWEETS_TOPIC: "tweet"}
STAGES = [Stage("by_author", "jobs.tweet_views.solution.TweetViewsProcessor", ("user_id",), VIEW,
                make=lambda _: (retention(),))]


def join_views(events: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: both sides grouped by author through the stage's processor (the
    lab's, or `solution`'s). `events` come partitioned by author (`build`): no shuffle here."""
    side = F.when(F.col("topic") == USERS_TOPIC, SIDES[USERS_TOPIC]).when(F.col("topic") == TWEETS_TOPIC,
                                                                          SIDES[TWEETS_TOPIC])
    rows = events.select(*[side.alias(c) if c == "side" else c for c in EVENT_COLUMNS])
    return chain(rows, STAGES, solution)


# --- What it writes -----------------------------------------------------------------------------

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


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: views and dead letters."""
    parsed = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views")
    by_author = parsed.repartition({"user_id": F.col("user_id")})  # the query's one shuffle
    return view_records(join_views(by_author.events, solution)).unionByName(by_author.dead_letters)


# --- The rest of the pattern's parts (joinlab.patterns.Job) -------------------------------------

SOLUTION, PROCESSORS = "jobs.tweet_views.solution", processors(STAGES)
SPARK_CONF, LOOKUP, SETTINGS = {}, None, ("LAB_TWEET_VIEWS_RETENTION",)
INTERVIEW = Interview(level="1, warm-up", time_box="30-45 min", key="tweet")


# --- Reading the output topic: what a consumer keeps ------------------------------------------

def view(tweet: dict, user: dict) -> dict:
    """One view, flat, with times as datetimes so that formatting never counts as a difference."""
    return {"tweet_id": tweet["tweet_id"], "tweet_version": tweet["version"], "text": tweet["text"],
            "tweet_time": parse_time(tweet["event_time"]), "user_id": user["user_id"],
            "user_version": user["version"], "name": user["name"], "handle": user["handle"],
            "user_time": parse_time(user["event_time"])}


def version(v: dict) -> tuple[int, int]:
    return v["tweet_version"], v["user_version"]


def actual(records: list) -> dict[int, dict]:
    """The last view of each tweet on the output topic: the highest (tweet, author) versions."""
    bodies = [json.loads(r.value) for r in records if r.topic == VIEWS_TOPIC]
    return last_by_version([view(b["tweet"], b["author"]) for b in bodies], "tweet_id", version)


# --- The stage in memory -----------------------------------------------------------------------

class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solution)

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as the stage's rows."""
        return [Row(**{c: e.get(c) for c in EVENT_COLUMNS} | {"side": SIDES[schema.topic],
                                                               "event_time": moment(micros(e["event_time"]))})
                for schema, e in valid_events(records, [USERS, TWEETS])]

    @staticmethod
    def views(out: list[Row]) -> dict:
        return last_by_version([r.asDict() for r in out], "tweet_id", version)
