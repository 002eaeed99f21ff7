"""Wrong answer: a right join whose users and tweets live in dicts on the processor object, not in
Spark's state. In one process it passes every scenario; but Spark makes a new processor object for
every micro-batch and after a restart, and each starts with empty dicts: tweets lose their author."""
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor


class TweetViewsProcessor(StatefulProcessor):
    def __init__(self, retention):
        self.retention = retention  # a timedelta: how far a profile update reaches back (tweet_views.md)

    def init(self, handle):
        self.users = {}   # user_id -> (version, name, handle, at)
        self.tweets = {}  # user_id -> {tweet_id: (version, text, at)}

    def handleInputRows(self, key, rows, timerValues):
        user_id = key[0]
        tweets = self.tweets.setdefault(user_id, {})
        before, changed = self.users.get(user_id), set()
        for row in rows:
            if row.side == "user":
                if user_id not in self.users or row.version > self.users[user_id][0]:
                    self.users[user_id] = (row.version, row.name, row.handle, row.event_time)
            elif row.tweet_id not in tweets or row.version > tweets[row.tweet_id][0]:
                tweets[row.tweet_id] = (row.version, row.text, row.event_time)
                changed.add(row.tweet_id)
        user = self.users.get(user_id)
        if user is None:
            return
        for tweet_id, (version, text, at) in tweets.items():
            if user != before or tweet_id in changed:
                yield Row(tweet_id=tweet_id, tweet_version=version, text=text, tweet_time=at, user_id=user_id,
                          user_version=user[0], name=user[1], handle=user[2], user_time=user[3])

    def close(self):
        pass
