"""Tweet views' output as a consumer reads it: the last view of each tweet, by version. The
verifier, the grader and the tests compare this with the batch reference (references/tweet_views.py)."""
from __future__ import annotations

import json

from jobs.tweet_views.job import VIEWS_TOPIC
from joinlab.kit.events import parse_time
from joinlab.kit.in_memory import last_by_version


def view(tweet: dict, user: dict) -> dict:
    """One view, flat, with times as datetimes so that formatting never counts as a difference."""
    return {"tweet_id": tweet["tweet_id"], "tweet_version": tweet["version"], "text": tweet["text"],
            "tweet_time": parse_time(tweet["event_time"]), "user_id": user["user_id"],
            "user_version": user["version"], "name": user["name"], "handle": user["handle"],
            "user_time": parse_time(user["event_time"])}


def version(v: dict) -> tuple[int, int]:
    return v["tweet_version"], v["user_version"]


def actual(records: list) -> dict[int, dict]:
    """The last view of each tweet on the output topic: the highest (tweet, author) versions."""
    bodies = [json.loads(r.value) for r in records if r.topic == VIEWS_TOPIC]
    return last_by_version([view(b["tweet"], b["author"]) for b in bodies], "tweet_id", version)
