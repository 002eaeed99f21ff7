"""Wrong answer: decide each row as it comes, against the tweets stored when the batch began. A
profile update re-emits those tweets, and a new tweet takes the profile known at its row; so a
tweet that comes before its author's profile in the same micro-batch is never emitted with it.
Right when the batch's rows come profile first; Spark does not promise that order."""
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle):
        self.user = handle.getValueState("user", "version bigint, name string, handle string, at timestamp")
        self.tweets = handle.getMapState("tweets", "tweet_id bigint", "version bigint, text string, at timestamp")

    def handleInputRows(self, key, rows, timerValues):
        stored = list(self.tweets.iterator())  # as the batch began
        for row in rows:
            user = self.user.get() if self.user.exists() else None
            if row.side == "user" and (user is None or row.version > user[0]):
                user = (row.version, row.name, row.handle, row.event_time)
                self.user.update(user)
                for (tweet_id,), (version, text, at) in stored:
                    yield self._view(key, tweet_id, version, text, at, user)
            elif row.side == "tweet":
                known = self.tweets.getValue((row.tweet_id,))
                if known is None or row.version > known[0]:
                    self.tweets.updateValue((row.tweet_id,), (row.version, row.text, row.event_time))
                    if user is not None:
                        yield self._view(key, row.tweet_id, row.version, row.text, row.event_time, user)

    @staticmethod
    def _view(key, tweet_id, version, text, at, user):
        return Row(tweet_id=tweet_id, tweet_version=version, text=text, tweet_time=at, user_id=key[0],
                   user_version=user[0], name=user[1], handle=user[2], user_time=user[3])

    def close(self):
        pass
