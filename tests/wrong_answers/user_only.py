"""Wrong answer: store only the user, and decorate each tweet as it passes. A tweet before its
author is lost, and a profile update never reaches the tweets already emitted."""
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle):
        self.user = handle.getValueState("user", "version bigint, name string, handle string, at timestamp")

    def handleInputRows(self, key, rows, timerValues):
        rows = list(rows)
        for row in rows:
            if row.side == "user" and (not self.user.exists() or row.version > self.user.get()[0]):
                self.user.update((row.version, row.name, row.handle, row.event_time))
        for row in rows:
            if row.side == "tweet" and self.user.exists():
                version, name, handle, at = self.user.get()
                yield Row(tweet_id=row.tweet_id, tweet_version=row.version, text=row.text, tweet_time=row.event_time,
                          user_id=row.user_id, user_version=version, name=name, handle=handle, user_time=at)

    def close(self):
        pass
