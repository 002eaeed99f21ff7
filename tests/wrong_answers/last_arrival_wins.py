"""Wrong answer: ignore versions, so the last record to arrive wins (a stale user version or an
old tweet version read late overwrites the newer one). Otherwise a right per-author join."""
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle):
        self.user = handle.getValueState("user", "version bigint, name string, handle string, at timestamp")
        self.tweets = handle.getMapState("tweets", "tweet_id bigint", "version bigint, text string, at timestamp")

    def handleInputRows(self, key, rows, timerValues):
        rows = list(rows)
        users = [r for r in rows if r.side == "user"]
        if users:
            last = users[-1]
            self.user.update((last.version, last.name, last.handle, last.event_time))
        for row in rows:
            if row.side == "tweet":
                self.tweets.updateValue((row.tweet_id,), (row.version, row.text, row.event_time))
        if not self.user.exists():
            return
        version, name, handle, at = self.user.get()
        changed = {r.tweet_id for r in rows if r.side == "tweet"}
        for (tweet_id,), (tweet_version, text, tweet_time) in self.tweets.iterator():
            if users or tweet_id in changed:
                yield Row(tweet_id=tweet_id, tweet_version=tweet_version, text=text, tweet_time=tweet_time,
                          user_id=key[0], user_version=version, name=name, handle=handle, user_time=at)

    def close(self):
        pass
