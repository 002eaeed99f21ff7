"""Wrong answer: emit a tweet's view as soon as the tweet comes, with an empty author (version 0, no
name) while the author is unknown. Versions and the fan-out are right, so a late author's view
replaces it; but a tweet whose author never comes keeps a view with nobody in it."""
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor

NOBODY = (0, None, None, None)


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle):
        self.user = handle.getValueState("user", "version bigint, name string, handle string, at timestamp")
        self.tweets = handle.getMapState("tweets", "tweet_id bigint", "version bigint, text string, at timestamp")

    def handleInputRows(self, key, rows, timerValues):
        before = self.user.get() if self.user.exists() else NOBODY
        user, changed = before, set()
        for row in rows:
            if row.side == "user" and row.version > user[0]:
                user = (row.version, row.name, row.handle, row.event_time)
            elif row.side == "tweet":
                known = self.tweets.getValue((row.tweet_id,))
                if known is None or row.version > known[0]:
                    self.tweets.updateValue((row.tweet_id,), (row.version, row.text, row.event_time))
                    changed.add(row.tweet_id)
        if user != before:
            self.user.update(user)
        for (tweet_id,), (version, text, at) in self.tweets.iterator():
            if user != before or tweet_id in changed:
                yield Row(tweet_id=tweet_id, tweet_version=version, text=text, tweet_time=at, user_id=key[0],
                          user_version=user[0], name=user[1], handle=user[2], user_time=user[3])

    def close(self):
        pass
