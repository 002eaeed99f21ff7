"""Tweet views' stage in memory: the query's stateful call as a declaration (STAGES), run through
pyspark's TwsTester one micro-batch at a time, with no Spark session (unit tests, the grader).
tests/test_queries.py checks STAGES against the query's plan."""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import Row

from jobs.tweet_views.consumer import version
from jobs.tweet_views.given import EVENT_COLUMNS, VIEW, retention
from jobs.tweet_views.job import TWEETS, USERS, USERS_TOPIC
from joinlab.kit.events import micros, moment, valid_events
from joinlab.kit.in_memory import Chain, last_by_version
from joinlab.kit.stages import Stage

STAGES = [Stage("by_author", "jobs.tweet_views.solution.TweetViewsProcessor", ("user_id",), VIEW,
                make=lambda _: (retention(),))]


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solution)

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as the stage's rows."""
        return [Row(**{c: e.get(c) for c in EVENT_COLUMNS} | {"side": "user" if schema.topic == USERS_TOPIC else "tweet",
                                                               "event_time": moment(micros(e["event_time"]))})
                for schema, e in valid_events(records, [USERS, TWEETS])]

    @staticmethod
    def views(out: list[Row]) -> dict:
        return last_by_version([r.asDict() for r in out], "tweet_id", version)
