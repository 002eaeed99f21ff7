"""Tweet views: users ⋈ tweets keyed by author, whichever side arrives first.

State per author (transformWithState, RocksDB): the latest user version and the latest version
of each of the author's tweets. A new tweet emits a view when the author is known; a newer user
version re-emits a view for every stored tweet; stale versions are ignored. So the last view of
each tweet never depends on the order the two topics were read in.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from joinlab.events import Check, EventSchema, parse_events

USERS_TOPIC, TWEETS_TOPIC = "users", "tweets"
VIEWS_TOPIC, DEAD_LETTERS_TOPIC = "tweet-views", "tweet-views-dlq"
INPUT_TOPICS = [USERS_TOPIC, TWEETS_TOPIC]
OUTPUT_TOPICS = [VIEWS_TOPIC, DEAD_LETTERS_TOPIC]

_POSITIVE_VERSION = Check("version >= 1", lambda e: e["version"] >= 1, "invalid field: version (must be >= 1)")
USERS = EventSchema(USERS_TOPIC, {"user_id": "bigint", "name": "string", "handle": "string",
                                  "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))
TWEETS = EventSchema(TWEETS_TOPIC, {"tweet_id": "bigint", "user_id": "bigint", "text": "string",
                                    "version": "bigint", "event_time": "timestamp"}, checks=(_POSITIVE_VERSION,))

# --- The stateful join ------------------------------------------------------------------------

# One input row shape for both sides, grouped by author: kind is "user" or "tweet".
SIDE_COLUMNS = ["kind", "user_id", "version", "event_time", "tweet_id", "text", "name", "handle"]
USER_STATE = "version bigint, name string, handle string, event_time timestamp"
TWEET_STATE = "version bigint, text string, event_time timestamp"
VIEW = ("tweet_id bigint, tweet_version bigint, text string, tweet_time timestamp, "
        "user_id bigint, user_version bigint, name string, handle string, user_time timestamp")


class TweetViewsProcessor(StatefulProcessor):
    """Per author: the latest user and the latest version of each tweet; emits views on change."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.user = handle.getValueState("user", USER_STATE)
        self.tweets = handle.getMapState("tweets", "tweet_id bigint", TWEET_STATE)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        user_id = key[0]
        author = self.user.get() if self.user.exists() else None
        author_changed = False
        changed: dict[int, tuple] = {}
        for row in rows:
            if row.kind == "user":
                if author is None or row.version > author[0]:
                    author, author_changed = (row.version, row.name, row.handle, row.event_time), True
            else:
                stored = changed.get(row.tweet_id)
                if stored is None and self.tweets.containsKey((row.tweet_id,)):  # getValue on a new key logs a WARN
                    stored = self.tweets.getValue((row.tweet_id,))
                if stored is None or row.version > stored[0]:
                    changed[row.tweet_id] = (row.version, row.text, row.event_time)
        if author_changed:
            self.user.update(author)
        for tweet_id, tweet in changed.items():
            self.tweets.updateValue((tweet_id,), tweet)
        if author is None:
            return  # tweets wait in state until their author arrives
        to_emit = self.tweets.iterator() if author_changed else (((t,), v) for t, v in changed.items())
        for (tweet_id,), (version, text, tweet_time) in to_emit:
            yield Row(tweet_id=tweet_id, tweet_version=version, text=text, tweet_time=tweet_time,
                      user_id=user_id, user_version=author[0], name=author[1], handle=author[2],
                      user_time=author[3])

    def close(self) -> None:
        pass


def join_views(events: DataFrame) -> DataFrame:
    """The core of the pattern: both sides grouped by author, through the processor."""
    sides = events.select(F.when(F.col("topic") == USERS_TOPIC, "user").otherwise("tweet").alias("kind"),
                          *SIDE_COLUMNS[1:])
    return sides.groupBy("user_id").transformWithState(TweetViewsProcessor(), VIEW, "Append", "None")


def build(raw: DataFrame) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: views and dead letters."""
    parsed = parse_events(raw, [USERS, TWEETS], DEAD_LETTERS_TOPIC, job="tweet-views")
    views = join_views(parsed.events)
    value = F.to_json(F.struct(
        "tweet_id",
        F.struct("tweet_id", F.col("tweet_version").alias("version"), "text",
                 F.col("tweet_time").alias("event_time")).alias("tweet"),
        F.struct("user_id", F.col("user_version").alias("version"), "name", "handle",
                 F.col("user_time").alias("event_time")).alias("author")))
    out = views.select(F.lit(VIEWS_TOPIC).alias("topic"), F.col("tweet_id").cast("string").alias("key"),
                       value.alias("value"))
    return out.unionByName(parsed.dead_letters)
