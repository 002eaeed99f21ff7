"""The right answer for tweet views, in plain Python from the input topics: the latest version of
each tweet joined to the latest version of its author. A tweet whose author never arrived has no
view. Ties between equal versions are duplicates, so the first one read is kept."""
from __future__ import annotations

from joinlab.events import latest_events
from joinlab.topics import Record
from jobs.tweet_views import TWEETS, USERS, actual, version, view  # noqa: F401 (the output contract)


def latest(records: list[Record]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(users by id, tweets by id), each at its highest version; invalid records are skipped."""
    tables = latest_events(records, [(USERS, "user_id"), (TWEETS, "tweet_id")], "version")
    return tables[USERS.topic], tables[TWEETS.topic]


def expected(records: list[Record]) -> dict[int, dict]:
    users, tweets = latest(records)
    return {tid: view(t, users[t["user_id"]]) for tid, t in tweets.items() if t["user_id"] in users}
