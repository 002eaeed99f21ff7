"""Tweet views, the solution's processor: per author, one state value holding the latest user
version and the latest version of each of the author's tweets (transformWithState, RocksDB).

A new tweet emits a view when the author is known; a newer user version re-emits a view for every
stored tweet; stale versions are ignored. So the last view of each tweet never depends on the
order the two topics were read in. The wiring (topics, parsing, keying, sink) is jobs/tweet_views.py.

Why one value per author: every state call is a round trip to the JVM. The author's state is read
once per micro-batch and written at most once, however many of their events the batch holds.

State bound: each author keeps the tweets whose event time is within RETENTION of the newest
event time seen for that author ($LAB_TWEET_VIEWS_RETENTION, default 30 days); an older tweet is
dropped, and an event older than that when it arrives is ignored. (Spark's state TTL needs the
ProcessingTime time mode; this join runs in time mode None, the processor contract.)
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from joinlab.named_state import ddl
from jobs.tweet_views import retention


class User(NamedTuple):
    version: int
    name: str
    handle: str
    event_time: datetime


class Tweet(NamedTuple):
    tweet_id: int
    version: int
    text: str
    event_time: datetime


class Author(NamedTuple):
    user: User | None  # None while the author's tweets wait for them
    tweets: list[Tweet]
    newest: datetime  # the newest event time seen for this author: the retention's reference


def utc(moment: datetime) -> datetime:
    """An aware UTC time: Spark hands input rows' times and stored times over differently (aware,
    or naive in local time), and the retention compares the two."""
    return moment.astimezone(timezone.utc)


# State an earlier layout of this processor kept (a value "user" and a map "tweets" per author).
# Spark restarts a checkpoint holding them without a word and this processor would not see them,
# so joinlab.job refuses such a checkpoint and says to run with --reset.
RETIRED_STATE = ("user", "tweets")


class TweetViewsProcessor(StatefulProcessor):
    """Per author: the latest user and the latest version of each tweet; emits views on change."""

    def __init__(self):
        self.retention = retention()  # read on the driver, travels with the processor

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.author = handle.getValueState("author", ddl(Author))

    def _stored(self) -> Author | None:
        raw = self.author.get()
        if raw is None:
            return None
        return Author(User(*raw[0]) if raw[0] is not None else None, [Tweet(*t) for t in raw[1]], raw[2])

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        stored = self._stored()
        user = stored.user if stored else None
        tweets = {t.tweet_id: t for t in stored.tweets} if stored else {}
        newest = utc(stored.newest) if stored else None
        user_changed, changed = False, set()
        for row in rows:
            newest = utc(row.event_time) if newest is None else max(newest, utc(row.event_time))
            if row.kind == "user":
                if user is None or row.version > user.version:
                    user, user_changed = User(row.version, row.name, row.handle, row.event_time), True
            else:
                known = tweets.get(row.tweet_id)
                if known is None or row.version > known.version:
                    tweets[row.tweet_id] = Tweet(row.tweet_id, row.version, row.text, row.event_time)
                    changed.add(row.tweet_id)
        horizon = newest - self.retention
        kept = {t.tweet_id: t for t in tweets.values() if utc(t.event_time) >= horizon}
        if user_changed or changed or len(kept) < len(tweets) or (stored and newest > utc(stored.newest)):
            self.author.update(Author(user, list(kept.values()), newest))
        if user is None:
            return  # tweets wait in state until their author arrives
        to_emit = kept.values() if user_changed else [kept[t] for t in changed if t in kept]
        for tweet in to_emit:
            yield Row(tweet_id=tweet.tweet_id, tweet_version=tweet.version, text=tweet.text,
                      tweet_time=tweet.event_time, user_id=key[0], user_version=user.version, name=user.name,
                      handle=user.handle, user_time=user.event_time)

    def close(self) -> None:
        pass
