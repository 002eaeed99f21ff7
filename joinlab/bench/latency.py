"""Step 5: end-to-end latency of the tweet-views job running continuously at a fixed input rate.

Why Kafka timestamps: both ends are CreateTime set by a producer, so no clock inside Spark is trusted."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

from generators.tweet_views import generate
from jobs.tweet_views import job as tweet_views
from jobs.tweet_views.job import INPUT_TOPICS, TWEETS_TOPIC, USERS_TOPIC, VIEWS_TOPIC
from joinlab.bench.offsets import offsets_json, read_ranges
from joinlab.bench.step import BenchError, Deadline, log
from joinlab.bench.table import Measurement
from joinlab.generate import Disorder, Record, send
from joinlab.job import stop_between_batches
from joinlab.topics import plain_consumer


USER_ID_SHIFT, TWEET_ID_SHIFT = 1_000_000_000, 1_000_000_000_000  # past any id of the first event set


def _fresh_ids(record: Record) -> Record:
    """The record with ids moved into a range the job's state has never seen: the job continues
    from its step-3 checkpoint, where the same ids already have newer versions."""
    body = json.loads(record.value)
    body["user_id"] += USER_ID_SHIFT
    key = body["user_id"]
    if record.topic == TWEETS_TOPIC:
        body["tweet_id"] += TWEET_ID_SHIFT
        key = body["tweet_id"]
    value = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return Record(record.topic, str(key).encode(), value, record.kind)


def latency_events(seed: int, rate: float, seconds: float) -> tuple[list[Record], list[Record]]:
    """(users, tweets): every user of a fresh event set, and rate x seconds tweet events. Users go
    first so that every tweet's view is emitted when the tweet arrives (no wait for its author)."""
    wanted = max(1, round(rate * seconds))
    count = math.ceil(wanted / 0.8) + 10  # ~88% of a generated set are tweet events
    records = [_fresh_ids(r) for r in generate(seed, count, disorder=Disorder())]
    users = [r for r in records if r.topic == USERS_TOPIC]
    tweets = [r for r in records if r.topic == TWEETS_TOPIC][:wanted]
    return users, tweets


def _read_from(bootstrap: str, topic: str, starts: dict[int, int], done: Callable[[list], bool],
               deadline: Deadline, what: str) -> list:
    """Consumer records of `topic` from `starts` on, until `done(records)` or the deadline."""
    from kafka import TopicPartition
    consumer = plain_consumer(bootstrap)
    out: list = []
    try:
        tps = [TopicPartition(topic, p) for p in starts]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp.partition])
        while not done(out):
            deadline.check(f"{what}: {len(out)} records so far")
            for records in consumer.poll(timeout_ms=200, max_records=10000).values():
                out.extend(records)
        return out
    finally:
        consumer.close()


def _source_caught_up(query, target: dict[str, dict[str, int]]) -> bool:
    """True once a finished batch's source end offsets reach `target` on every partition."""
    for progress in query.recentProgress:
        for source in progress.get("sources", []):
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            if isinstance(end, dict) and all(int(end.get(t, {}).get(p, -1)) >= o
                                             for t, parts in target.items() for p, o in parts.items()):
                return True
    return False


def _percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def _wait_caught_up(query, bootstrap: str, deadline: Deadline) -> None:
    """Block until the running job has finished a batch that reaches the input topics' current end."""
    target = json.loads(offsets_json(read_ranges(bootstrap, INPUT_TOPICS), lambda b, e: e))
    while not _source_caught_up(query, target):
        if query.exception() is not None or not query.isActive:
            raise BenchError(f"step 5: the job stopped: {query.exception()}")
        deadline.check()
        time.sleep(0.1)  # polling a condition, under a deadline


class _ViewMatcher:
    """Latency per tweet event (tweet_id, version) = its first view's timestamp - its own. The first
    view of version >= v counts: within one micro-batch the processor keeps only the newest version
    of a tweet, so an edit that arrives in the same batch as its tweet emits one view, for the edit."""

    def __init__(self, sent: dict[tuple[int, int], int]):
        self.sent = sent
        self.need = {}  # tweet_id -> the highest version sent
        for tweet_id, version in sent:
            self.need[tweet_id] = max(version, self.need.get(tweet_id, 0))
        self.views: dict[int, list[tuple[int, int]]] = {}  # tweet_id -> [(version, timestamp)], in order
        self.newest: dict[int, int] = {}
        self.scanned = 0

    def add(self, records: list) -> bool:
        """Take the records not seen yet; True once every sent version has a view."""
        for r in records[self.scanned:]:
            body = json.loads(r.value)
            tweet_id, version = body["tweet_id"], body["tweet"]["version"]
            if tweet_id in self.need:
                self.views.setdefault(tweet_id, []).append((version, r.timestamp))
                self.newest[tweet_id] = max(version, self.newest.get(tweet_id, 0))
        self.scanned = len(records)
        return all(self.newest.get(t, 0) >= v for t, v in self.need.items())

    def latencies(self) -> tuple[list[int], int]:
        """(sorted latencies in ms of the matched events, how many matched a newer version)."""
        out, by_newer = [], 0
        for (tweet_id, version), sent_ms in self.sent.items():
            first = next(((v, ts) for v, ts in self.views.get(tweet_id, []) if v >= version), None)
            if first is not None:
                out.append(first[1] - sent_ms)
                by_newer += first[0] > version
        return sorted(out), by_newer


def end_to_end_latency(spark, bootstrap: str, checkpoint: Path, seed: int, rate: float, seconds: float,
                       trigger: str) -> Measurement:
    """The job running continuously (from its step-3 checkpoint: no backlog, warm state) while
    fresh tweets arrive at `rate`/s. Latency of a tweet = Kafka timestamp of its first view
    (CreateTime, set by the sink's producer) - Kafka timestamp of the tweet record (CreateTime,
    set when our producer sent it); see _ViewMatcher for which view is 'its first'."""
    from joinlab.job import start as start_job
    users, tweets = latency_events(seed, rate, seconds)
    tweet_starts = {p: e for (_, p), (_, e) in read_ranges(bootstrap, [TWEETS_TOPIC]).items()}
    view_starts = {p: e for (_, p), (_, e) in read_ranges(bootstrap, [VIEWS_TOPIC]).items()}
    query = start_job(spark, tweet_views, bootstrap, str(checkpoint), trigger_interval=trigger,
                      name="bench-tweet-views-latency")
    try:
        log(f"  sending {len(users)} users first, then waiting until the job has processed them")
        send(bootstrap, users, progress=False)
        _wait_caught_up(query, bootstrap, Deadline(180, "step 5 (the running job's batch of users)"))
        batches_before = len(query.recentProgress)

        log(f"  sending {len(tweets)} tweets at {rate:g}/s (~{len(tweets) / rate:.0f} s)")
        sent_at = time.monotonic()
        send(bootstrap, tweets, rate=rate, progress=False)
        send_seconds = time.monotonic() - sent_at

        inputs = _read_from(bootstrap, TWEETS_TOPIC, tweet_starts, lambda got: len(got) >= len(tweets),
                            Deadline(60, "step 5 (reading the sent tweets back)"), "tweets")
        matcher = _ViewMatcher({(b["tweet_id"], b["version"]): r.timestamp
                                for r in inputs for b in [json.loads(r.value)]})

        def done(got: list) -> bool:
            if query.exception() is not None:
                raise BenchError(f"step 5: the job failed: {query.exception()}")
            return matcher.add(got)

        try:
            _read_from(bootstrap, VIEWS_TOPIC, view_starts, done,
                       Deadline(120, "step 5 (a view of every sent tweet)"), "views")
            incomplete = ""
        except BenchError as exc:  # report what matched, and say that it is incomplete
            incomplete = f"; INCOMPLETE: {exc}"
        durations = sorted(p["durationMs"]["triggerExecution"] for p in query.recentProgress[batches_before:]
                           if p.get("numInputRows"))
    finally:
        stop_between_batches(query)
    latencies, by_newer = matcher.latencies()
    if not latencies:
        raise BenchError(f"step 5: no view of the {len(matcher.sent)} sent tweets arrived{incomplete}")
    batch = f"; median batch {_percentile(durations, 50):.0f} ms" if durations else ""
    note = (f"p50 {_percentile(latencies, 50):.0f} ms, p99 {_percentile(latencies, 99):.0f} ms; "
            f"matched {len(latencies)}/{len(matcher.sent)} ({by_newer} by a newer version)"
            f"{batch}; trigger {trigger}{incomplete}")
    return Measurement("5  e2e latency (job running)", len(matcher.sent), send_seconds, note)

