"""End-to-end latency of the tweet-views job running continuously at a fixed input rate.

Why Kafka timestamps: both ends are CreateTime set by a producer, so no clock inside Spark is
trusted. Why tweet views only: its views name the tweet version they show, so each input event
is matched to the first output that reflects it; the other patterns' outputs do not say which
input made them.
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from joinlab import patterns
from perf.bench.batches import BenchError, Deadline, log
from joinlab.generate import Disorder, Record, send
from joinlab.runner import start, stop_between_batches
from joinlab.status import as_dict
from joinlab.topics import end_offsets, partitions_of, plain_consumer

PATTERN = "tweet-views"
USER_ID_SHIFT, TWEET_ID_SHIFT = 1_000_000_000, 1_000_000_000_000  # past any id the job's state holds


@dataclass
class Latency:
    """Sorted latencies in ms of the matched tweet events, and how the run went."""
    sent: int
    send_s: float
    latencies: list[int]
    by_newer: int  # matched by a view of a newer version of the tweet
    median_batch_ms: float | None
    incomplete: str = ""  # why not every sent tweet got a view, if it did not

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile."""
        return self.latencies[max(0, math.ceil(p / 100 * len(self.latencies)) - 1)]


def _ends(bootstrap: str, topics: list[str]) -> dict[str, dict[int, int]]:
    """{topic: {partition: end offset}} now."""
    consumer = plain_consumer(bootstrap)
    try:
        out: dict[str, dict[int, int]] = {}
        for tp, end in end_offsets(consumer, partitions_of(consumer, topics)).items():
            out.setdefault(tp.topic, {})[tp.partition] = end
        return out
    finally:
        consumer.close()


def _fresh_ids(record: Record, tweets_topic: str) -> Record:
    """The record with ids moved into a range the job's state has never seen: the job continues
    from a checkpoint where the same ids already have newer versions."""
    body = json.loads(record.value)
    body["user_id"] += USER_ID_SHIFT
    key = body["user_id"]
    if record.topic == tweets_topic:
        body["tweet_id"] += TWEET_ID_SHIFT
        key = body["tweet_id"]
    value = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return Record(record.topic, str(key).encode(), value, record.kind)


def latency_events(job, seed: int, rate: float, seconds: float) -> tuple[list[Record], list[Record]]:
    """(users, tweets): every user of a fresh event set, and rate x seconds tweet events. Users go
    first so that every tweet's view is emitted when the tweet arrives (no wait for its author)."""
    wanted = max(1, round(rate * seconds))
    count = math.ceil(wanted / 0.8) + 10  # most of a generated set are tweet events
    generated = patterns.generator(PATTERN).generate(seed, count, disorder=Disorder())
    records = [_fresh_ids(r, job.TWEETS_TOPIC) for r in generated]
    users = [r for r in records if r.topic == job.USERS_TOPIC]
    tweets = [r for r in records if r.topic == job.TWEETS_TOPIC][:wanted]
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


def _source_caught_up(query, target: dict[str, dict[int, int]]) -> bool:
    """True once a finished batch's source end offsets reach `target` on every partition."""
    for progress in query.recentProgress:
        for source in progress.get("sources", []):
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            if isinstance(end, dict) and all(int(end.get(t, {}).get(str(p), -1)) >= o
                                             for t, parts in target.items() for p, o in parts.items()):
                return True
    return False


def _wait_caught_up(query, bootstrap: str, topics: list[str], deadline: Deadline) -> None:
    """Block until the running job has finished a batch that reaches the input topics' current end."""
    target = _ends(bootstrap, topics)
    while not _source_caught_up(query, target):
        if query.exception() is not None or not query.isActive:
            raise BenchError(f"latency: the job stopped: {query.exception()}")
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
                       trigger: str) -> Latency:
    """The job running continuously (from `checkpoint`, which has read its topics to the end: no
    backlog, warm state) while fresh tweets arrive at `rate`/s. Latency of a tweet = Kafka timestamp
    of its first view (CreateTime, set by the sink's producer) - Kafka timestamp of the tweet record
    (CreateTime, set when our producer sent it); see _ViewMatcher for which view is 'its first'."""
    job = patterns.job(PATTERN)
    users, tweets = latency_events(job, seed, rate, seconds)
    tweet_starts = _ends(bootstrap, [job.TWEETS_TOPIC]).get(job.TWEETS_TOPIC, {})
    view_starts = _ends(bootstrap, [job.VIEWS_TOPIC]).get(job.VIEWS_TOPIC, {})
    query = start(spark, job, bootstrap, str(checkpoint), trigger_interval=trigger, name="bench-tweet-views-latency")
    try:
        log(f"  sending {len(users)} users first, then waiting until the job has processed them")
        send(bootstrap, users, progress=False)
        _wait_caught_up(query, bootstrap, job.INPUT_TOPICS, Deadline(180, "latency (the running job's batch of users)"))
        batches_before = len(query.recentProgress)

        log(f"  sending {len(tweets)} tweets at {rate:g}/s (~{len(tweets) / rate:.0f} s)")
        sent_at = time.monotonic()
        send(bootstrap, tweets, rate=rate, progress=False)
        send_s = time.monotonic() - sent_at

        inputs = _read_from(bootstrap, job.TWEETS_TOPIC, tweet_starts, lambda got: len(got) >= len(tweets),
                            Deadline(60, "latency (reading the sent tweets back)"), "tweets")
        matcher = _ViewMatcher({(b["tweet_id"], b["version"]): r.timestamp
                                for r in inputs for b in [json.loads(r.value)]})

        def done(got: list) -> bool:
            if query.exception() is not None:
                raise BenchError(f"latency: the job failed: {query.exception()}")
            return matcher.add(got)

        try:
            _read_from(bootstrap, job.VIEWS_TOPIC, view_starts, done,
                       Deadline(120, "latency (a view of every sent tweet)"), "views")
            incomplete = ""
        except BenchError as exc:  # report what matched, and say that it is incomplete
            incomplete = f"INCOMPLETE: {exc}"
        durations = [p["durationMs"]["triggerExecution"] for p in map(as_dict, query.recentProgress[batches_before:])
                     if p.get("numInputRows")]
    finally:
        stop_between_batches(query)
    latencies, by_newer = matcher.latencies()
    if not latencies:
        raise BenchError(f"latency: no view of the {len(matcher.sent)} sent tweets arrived; {incomplete}")
    return Latency(len(matcher.sent), send_s, latencies, by_newer,
                   statistics.median(durations) if durations else None, incomplete)
