"""Tweet views, the solution's processor: per author, one state value holding the latest user
version and the latest version of each of the author's tweets (transformWithState, RocksDB).

A new tweet emits a view when the author is known; a newer user version re-emits a view for every
stored tweet it reaches; stale versions are ignored. So the last view of each tweet never depends
on the order the two topics were read in. The wiring (topics, parsing, keying, sink) is
jobs/tweet_views/job.py.

Why one value per author: every state call is a round trip to the JVM. The author's state is read
once per micro-batch and written at most once, however many of their events the batch holds.

Retention ($LAB_TWEET_VIEWS_RETENTION, R, default 30 days): a profile version reaches the tweets
written at most R before it, so a tweet's last view carries the author's last profile within R
of the tweet, whatever order the topics are read in and however a backfill cuts them into
batches. An author keeps the tweets within 2R of the newest event seen for them: the second R is
room for the two topics to be read up to R apart (a profile update that comes that late still
reaches its tweets). A tweet more than 2R behind the author's newest event when it arrives is
ignored. (Spark's state TTL needs the ProcessingTime time mode; this join runs in time mode
None, the processor contract.)
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from joinlab.kit.typed_state import ddl, load


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


# State of the per-event layout (a value "user" and a map "tweets" per author), which this processor
# does not read. Spark restarts a checkpoint holding them without a word and this processor would
# not see them, so joinlab.runner refuses such a checkpoint and says to run with --reset.
RETIRED_STATE = ("user", "tweets")


class TweetViewsProcessor(StatefulProcessor):
    """Per author: the latest user and the latest version of each tweet; emits views on change."""

    def __init__(self, retention: timedelta):
        self.retention = retention  # the job's $LAB_TWEET_VIEWS_RETENTION, read on the driver

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.author = handle.getValueState("author", ddl(Author))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        stored = load(Author, self.author.get())
        user = stored.user if stored else None
        tweets = {t.tweet_id: t for t in stored.tweets} if stored else {}
        newest = utc(stored.newest) if stored else None
        profiles, changed = {}, set()  # the batch's newer user versions, by version; tweets new or edited
        for row in rows:
            newest = utc(row.event_time) if newest is None else max(newest, utc(row.event_time))
            if row.side == "user":
                if (user is None or row.version > user.version) and row.version not in profiles:
                    profiles[row.version] = User(row.version, row.name, row.handle, row.event_time)
            else:
                known = tweets.get(row.tweet_id)
                if known is None or row.version > known.version:
                    tweets[row.tweet_id] = Tweet(row.tweet_id, row.version, row.text, row.event_time)
                    changed.add(row.tweet_id)
        written = {t.tweet_id: utc(t.event_time) for t in tweets.values()}
        kept = {t.tweet_id: t for t in tweets.values() if written[t.tweet_id] >= newest - 2 * self.retention}
        latest = max(profiles.values(), key=lambda u: u.version) if profiles else user
        if profiles or changed or len(kept) < len(tweets) or (stored and newest > utc(stored.newest)):
            self.author.update(Author(latest, list(kept.values()), newest))
        if latest is None:
            return  # tweets wait in state until their author arrives
        # a tweet's view carries the last profile within the retention of the tweet, among the stored
        # one and the batch's: newest version first, so the first one within reach is the one
        profiles_by_version = sorted(((utc(u.event_time), u) for u in [user, *profiles.values()] if u is not None),
                                     key=lambda p: -p[1].version)
        for tweet in kept.values() if profiles else [kept[t] for t in changed if t in kept]:
            reach = written[tweet.tweet_id] + self.retention
            best = next((u for at, u in profiles_by_version if at <= reach), None)
            if best is not None and (tweet.tweet_id in changed or best is not user):
                yield Row(tweet_id=tweet.tweet_id, tweet_version=tweet.version, text=tweet.text,
                          tweet_time=tweet.event_time, user_id=key[0], user_version=best.version, name=best.name,
                          handle=best.handle, user_time=best.event_time)
