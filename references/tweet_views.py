"""The right answer for tweet views, in plain Python from the input topics: the latest version of
each tweet joined to the latest version of its author. A tweet whose author never arrived has no
view. Ties between equal versions are duplicates, so the first one read is kept."""
from __future__ import annotations

import json

from joinlab.events import latest_events, parse_time
from joinlab.topics import Record
from jobs.tweet_views import TWEETS, USERS, VIEWS_TOPIC


def latest(records: list[Record]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(users by id, tweets by id), each at its highest version; invalid records are skipped."""
    tables = latest_events(records, [(USERS, "user_id"), (TWEETS, "tweet_id")], "version")
    return tables[USERS.topic], tables[TWEETS.topic]


def view(tweet: dict, user: dict) -> dict:
    """One view, flat, with times as datetimes so that formatting never counts as a difference."""
    return {"tweet_id": tweet["tweet_id"], "tweet_version": tweet["version"], "text": tweet["text"],
            "tweet_time": parse_time(tweet["event_time"]), "user_id": user["user_id"],
            "user_version": user["version"], "name": user["name"], "handle": user["handle"],
            "user_time": parse_time(user["event_time"])}


def expected(records: list[Record]) -> dict[int, dict]:
    users, tweets = latest(records)
    return {tid: view(t, users[t["user_id"]]) for tid, t in tweets.items() if t["user_id"] in users}


def actual(records: list[Record]) -> dict[int, dict]:
    """The last view of each tweet on the output topic: the highest (tweet, author) versions."""
    views: dict[int, dict] = {}
    for record in records:
        if record.topic != VIEWS_TOPIC:
            continue
        body = json.loads(record.value)
        candidate = view(body["tweet"], body["author"])
        current = views.get(candidate["tweet_id"])
        if current is None or version(candidate) > version(current):
            views[candidate["tweet_id"]] = candidate
    return views


def version(v: dict) -> tuple[int, int]:
    return v["tweet_version"], v["user_version"]
