"""A study's processor (not the lab's): tweet views writing only what changed. The author's profile
is one value, each tweet an entry of a map written only when it is new or edited, so the bytes a
batch writes follow what it changed, not what the author holds; the price is a round trip per
tweet event (its stored version) and per changed tweet. No retention pruning: the study's events
span minutes. Against the lab's one value per author:

    .venv/bin/python -m perf.user_runs --lab . --solution perf/tweet_views_changed_only.py --rounds 1
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from joinlab.kit.typed_state import ddl, load


class Profile(NamedTuple):
    version: int | None  # None while the author's tweets wait for them
    name: str | None
    handle: str | None
    event_time: datetime | None
    newest: datetime  # the newest event time seen for this author


class Tweet(NamedTuple):
    version: int
    text: str
    event_time: datetime


def utc(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc)


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention=None):  # the job hands every tweet-views processor its retention
        pass

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.profile = handle.getValueState("profile", ddl(Profile))
        self.tweets = handle.getMapState("tweet", "tweet_id bigint", ddl(Tweet))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        stored = load(Profile, self.profile.get())
        user = stored if stored and stored.version is not None else None
        newest = utc(stored.newest) if stored else None
        newer, changed = None, {}  # the batch's newest user version; tweets new or edited
        for row in rows:
            newest = utc(row.event_time) if newest is None else max(newest, utc(row.event_time))
            if row.side == "user":
                if (newer or user) is None or row.version > (newer or user).version:
                    newer = Profile(row.version, row.name, row.handle, row.event_time, newest)
            else:
                known = changed.get(row.tweet_id) or load(Tweet, self.tweets.getValue((row.tweet_id,)))
                if known is None or row.version > known.version:
                    changed[row.tweet_id] = Tweet(row.version, row.text, row.event_time)
        for tweet_id, tweet in changed.items():
            self.tweets.updateValue((tweet_id,), tweet)
        latest = newer or user
        if newer or stored is None or newest != utc(stored.newest):
            self.profile.update((latest or Profile(None, None, None, None, newest))._replace(newest=newest))
        if latest is None:
            return  # tweets wait in state until their author arrives
        emit = (((k[0],), load(Tweet, v)) for k, v in self.tweets.iterator()) if newer else (
            ((t,), tweet) for t, tweet in changed.items())
        for (tweet_id,), tweet in emit:
            yield Row(tweet_id=tweet_id, tweet_version=tweet.version, text=tweet.text, tweet_time=tweet.event_time,
                      user_id=key[0], user_version=latest.version, name=latest.name, handle=latest.handle,
                      user_time=latest.event_time)
