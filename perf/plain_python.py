"""The tweet-views join in plain Python, from memory: what the join costs without Spark or Kafka.

    .venv/bin/python -m perf.plain_python [--events 50000]

Two rates on the same seeded events: the job's own processor driven by pyspark's TwsTester
(in-memory state, one call per event), and the same logic on dicts (the join alone). Each
includes json.loads of the event and a JSON encode of each view. Compare them with the
tweet-views steady rate of `make bench`: the difference is what Spark's state calls, its tasks
and Kafka cost.
"""
from __future__ import annotations

import argparse
import json
import time

from jobs.tweet_views.given import retention
from jobs.tweet_views.job import USERS_TOPIC
from jobs.tweet_views.solution import TweetViewsProcessor
from joinlab.kit.events import parse_time
from joinlab.generate import Disorder, Record


def _side(record: Record, body: dict) -> dict:
    """The fields the processor reads, typed as Spark hands them to it."""
    is_user = record.topic == USERS_TOPIC
    return {"side": "user" if is_user else "tweet", "user_id": body["user_id"], "version": body["version"],
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


def plain_python_tws(records: list[Record]) -> tuple[float, str]:
    """jobs.tweet_views.solution.TweetViewsProcessor driven by pyspark's TwsTester (in-memory state), one
    test(user_id, [row]) call per event in arrival order: the job's own logic, minus Spark."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester
    start = time.monotonic()
    tester = TwsTester(TweetViewsProcessor(retention()))
    views, last = 0, {}
    for record in records:
        side = _side(record, json.loads(record.value))
        for v in tester.test(side["user_id"], [Row(**side)]):
            _view_json(v.tweet_id, v.tweet_version, v.text, v.tweet_time, v.user_id,
                       (v.user_version, v.name, v.handle, v.user_time))
            last[v.tweet_id] = v.tweet_version
            views += 1
    seconds = time.monotonic() - start
    return seconds, f"{views} views, {len(last)} tweets"


def plain_python_dict(records: list[Record]) -> tuple[float, str]:
    """The processor's logic on plain dicts (no Row, no state API): how fast one Python process
    can join when nothing but the join itself is paid for."""
    start = time.monotonic()
    users: dict[int, tuple] = {}
    tweets: dict[int, dict[int, tuple]] = {}  # author -> tweet_id -> (version, text, time)
    views, last = 0, {}
    for record in records:
        side = _side(record, json.loads(record.value))
        uid = side["user_id"]
        author = users.get(uid)
        if side["side"] == "user":
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
    return seconds, f"{views} views, {len(last)} tweets"



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.plain_python", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    from generators.tweet_views import generate
    records = generate(args.seed, args.events, disorder=Disorder())
    for label, join in (("the job's processor, TwsTester", plain_python_tws), ("the same logic on dicts", plain_python_dict)):
        seconds, what = join(records)
        print(f"{label:<32} {len(records):>7} events {seconds:7.2f} s {len(records) / seconds:>10,.0f} events/s ({what})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
