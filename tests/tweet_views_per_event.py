"""A tweet-views processor with the per-event state layout: the value "user" and the map "tweets",
read and written per event (exists + get of the user, containsKey + getValue per new tweet,
updateValue per changed tweet). Loaded with joinlab.kit.solutions.from_file and plugged into the same
job: test_tweet_views checks that the lab's processor refuses a checkpoint of this layout, and
perf/ablation.py measures the lab's state per key against it. Not used by the lab.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

USER_STATE = "version bigint, name string, handle string, event_time timestamp"
TWEET_STATE = "version bigint, text string, event_time timestamp"


class TweetViewsProcessor(StatefulProcessor):
    """Per author: the latest user and the latest version of each tweet; emits views on change."""

    def __init__(self, retention=None):  # the job hands every tweet-views processor its retention
        pass

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.user = handle.getValueState("user", USER_STATE)
        self.tweets = handle.getMapState("tweets", "tweet_id bigint", TWEET_STATE)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        user_id = key[0]
        author = self.user.get() if self.user.exists() else None
        author_changed = False
        changed: dict[int, tuple] = {}
        for row in rows:
            if row.side == "user":
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
