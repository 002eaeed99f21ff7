"""Step 4: the same join in plain Python, from memory: what the join costs without Spark or Kafka.

Why two rows: TwsTester runs the job's own processor; the dicts show the join alone."""
from __future__ import annotations

import json
import time

from jobs.tweet_views.job import USERS_TOPIC
from jobs.tweet_views.solution import TweetViewsProcessor
from joinlab.bench.step import Deadline
from joinlab.bench.table import Measurement
from joinlab.events import parse_time
from joinlab.generate import Record


def _side(record: Record, body: dict) -> dict:
    """The fields the processor reads, typed as Spark hands them to it."""
    is_user = record.topic == USERS_TOPIC
    return {"kind": "user" if is_user else "tweet", "user_id": body["user_id"], "version": body["version"],
            "event_time": parse_time(body["event_time"]), "tweet_id": None if is_user else body["tweet_id"],
            "text": None if is_user else body["text"], "name": body["name"] if is_user else None,
            "handle": body["handle"] if is_user else None}


def _view_json(tweet_id, version, text, tweet_time, user_id, author) -> str:
    """A view as the job writes it (to_json of the same struct), so both paths do the encoding."""
    return json.dumps({"tweet_id": tweet_id,
                       "tweet": {"tweet_id": tweet_id, "version": version, "text": text,
                                 "event_time": tweet_time.isoformat()},
                       "author": {"user_id": user_id, "version": author[0], "name": author[1],
                                  "handle": author[2], "event_time": author[3].isoformat()}},
                      separators=(",", ":"))


def plain_python_tws(records: list[Record], timeout_s: float) -> Measurement:
    """jobs.tweet_views.solution.TweetViewsProcessor driven by pyspark's TwsTester (in-memory state), one
    test(user_id, [row]) call per event in arrival order: the job's own logic, minus Spark."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester
    deadline = Deadline(timeout_s, "step 4 (plain Python, TwsTester)")
    start = time.monotonic()
    tester = TwsTester(TweetViewsProcessor())
    views, last = 0, {}
    for i, record in enumerate(records):
        if i % 1000 == 0:
            deadline.check(f"{i} of {len(records)} events")
        side = _side(record, json.loads(record.value))
        for v in tester.test(side["user_id"], [Row(**side)]):
            _view_json(v.tweet_id, v.tweet_version, v.text, v.tweet_time, v.user_id,
                       (v.user_version, v.name, v.handle, v.user_time))
            last[v.tweet_id] = v.tweet_version
            views += 1
    seconds = time.monotonic() - start
    return Measurement("4a plain Python: TwsTester", len(records), seconds,
                       f"same processor, 1 process, no Kafka I/O; {views} views, {len(last)} tweets")


def plain_python_dict(records: list[Record], timeout_s: float) -> Measurement:
    """The processor's logic on plain dicts (no Row, no state API): how fast one Python process
    can join when nothing but the join itself is paid for."""
    deadline = Deadline(timeout_s, "step 4 (plain Python, dicts)")
    start = time.monotonic()
    users: dict[int, tuple] = {}
    tweets: dict[int, dict[int, tuple]] = {}  # author -> tweet_id -> (version, text, time)
    views, last = 0, {}
    for i, record in enumerate(records):
        if i % 1000 == 0:
            deadline.check(f"{i} of {len(records)} events")
        side = _side(record, json.loads(record.value))
        uid = side["user_id"]
        author = users.get(uid)
        if side["kind"] == "user":
            if author is not None and side["version"] <= author[0]:
                continue
            author = users[uid] = (side["version"], side["name"], side["handle"], side["event_time"])
            emit = list(tweets.get(uid, {}).items())
        else:
            mine = tweets.setdefault(uid, {})
            stored = mine.get(side["tweet_id"])
            if stored is not None and side["version"] <= stored[0]:
                continue
            mine[side["tweet_id"]] = (side["version"], side["text"], side["event_time"])
            emit = [(side["tweet_id"], mine[side["tweet_id"]])] if author is not None else []
        for tweet_id, (version, text, tweet_time) in emit:
            _view_json(tweet_id, version, text, tweet_time, uid, author)
            last[tweet_id] = version
            views += 1
    seconds = time.monotonic() - start
    return Measurement("4b plain Python: dict join", len(records), seconds,
                       f"same logic on dicts, no TwsTester; {views} views, {len(last)} tweets")

