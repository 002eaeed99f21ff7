"""Exercise 1 (warm-up, 30-45 min): tweet views. Read tweet_views.md first (in the lab:
jobs/tweet_views/README.md, the part above its solution marker).

Write TweetViewsProcessor. Everything else is given: the job (jobs/tweet_views/job.py) parses both
topics, sends malformed records to the dead-letter topic, groups both sides by author (user_id)
and, once per author per micro-batch, calls

    handleInputRows(key, rows, timerValues)

with key = (user_id,) and that author's rows of the micro-batch, in no particular order. Each row
has the columns of EVENT_COLUMNS (in given.py, beside the job):

    side        "user" or "tweet"
    user_id     the author
    version     the user's version (side "user") or the tweet's version (side "tweet")
    event_time  a datetime
    tweet_id, text      (side "tweet"; None for users)
    name, handle        (side "user"; None for tweets)

Whatever you yield goes to the tweet-views topic, keyed by tweet_id; a consumer keeps, per tweet,
the view with the highest (tweet_version, user_version). A profile version reaches only the
tweets written at most the retention before it (retention() in given.py:
$LAB_TWEET_VIEWS_RETENTION, 30 days by default). Yield rows with exactly the columns of VIEW (in
given.py):

    Row(tweet_id=..., tweet_version=..., text=..., tweet_time=...,
        user_id=..., user_version=..., name=..., handle=..., user_time=...)

State lives in `handle` (set up in init): handle.getValueState(name, "field type, ..."),
handle.getMapState(name, "key type", "field type, ..."), handle.getListState(...). A ValueState has
exists(), get(), update(tuple), clear(); a MapState containsKey((k,)), getValue((k,)),
updateValue((k,), tuple), removeKey((k,)), iterator(), keys(), values().

Grade it: `make check-fast`, then `make check` (in a workspace), or in the lab
`joinlab interview check tweet-views --solution THIS_FILE`.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle


class TweetViewsProcessor(StatefulProcessor):

    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: declare the state this processor keeps per author.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        # TODO: join each tweet to its author; yield a view (see above) whenever one changes.
        return iter(())

    def close(self) -> None:
        pass
