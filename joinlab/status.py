"""One micro-batch at a glance: what `joinlab run` prints per batch and what the notebooks tabulate.

Every number comes from the batch's StreamingQueryProgress, so watching costs the job nothing.
Records in per topic are the source's end minus start offsets, not numInputRows: that counts a
source once per scan (a plan with two branches over a source may scan it twice) and sums its
topics. Records out per topic, dead letters among them, are counted by Spark's `observe`
(joinlab.runner.start's `counted`) as the rows pass on to the sink, in the same scan: the sink's own `numOutputRows`
sums all topics, and is -1 for the Python sink.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
import time
import types
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from joinlab.kit.kafka import COUNTED
from joinlab.runner import as_dict, stop_between_batches
from joinlab.topics import own

NO_WATERMARK = "1970-01-01T00:00:00.000Z"  # what Spark reports until the first event passes the delay


def offsets(value) -> dict:
    """A source offset as {topic: {partition: offset}} (Spark gives a JSON string; {} for None)."""
    return (json.loads(value) if isinstance(value, str) else value) or {}


def offset_spans(source: dict) -> dict[str, int]:
    """Records per topic between a source's start and end offsets ({topic: {partition: offset}});
    a first batch has no start offset: it read from offset 0 (the lab never trims its topics)."""
    start, end = offsets(source.get("startOffset")), offsets(source.get("endOffset"))
    return {topic: sum(int(offset) - int(start.get(topic, {}).get(part, 0)) for part, offset in parts.items())
            for topic, parts in end.items() if isinstance(parts, dict)}


@dataclass
class BatchStatus:
    batch: int
    records_in: dict[str, int]
    records_out: dict[str, int]           # per output topic, dead-letter topic excluded
    dead_letters: int
    duration_s: float
    watermark: str | None                 # ISO-8601 UTC; NO_WATERMARK before it first moves, None if the job has none
    state_rows: list[int] = field(default_factory=list)  # one per stateful stage
    timestamp: str = ""
    # Valid records that changed no state and wrote nothing: old versions or repeats of what the job
    # already had (a generator run again with the same --seed). Said, so that `out 0` is not a riddle.
    old_versions: int = 0

    def line(self) -> str:
        """`batch 12 | in tweets 47, users 3 | out tweet-views 45 | dead letters 2 | 0.84 s | ...`"""
        parts = [f"batch {self.batch}",
                 "in " + _counts(self.records_in),
                 "out " + _counts(self.records_out),
                 f"dead letters {self.dead_letters}",
                 f"{self.duration_s:.2f} s"]
        if self.watermark:
            parts.append("watermark " + ("-" if self.watermark == NO_WATERMARK
                                         else self.watermark.replace("T", " ").replace(".000Z", "").rstrip("Z")))
        if self.state_rows:
            parts.append("state rows " + " / ".join(str(n) for n in self.state_rows))
        if self.old_versions:
            n = self.old_versions
            parts.append(f"{n} old version{'s' * (n != 1)} ignored: records the job already had")
        return " | ".join(parts)

    def json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{topic} {n}" for topic, n in counts.items()) if counts else "0"


def batch_status(progress: Any, input_topics: Iterable[str], output_topics: Iterable[str],
                 dead_letter_topic: str | None) -> BatchStatus:
    p = as_dict(progress)
    spans = [offset_spans(source) for source in p.get("sources") or []]
    written = (p.get("observedMetrics") or {}).get(COUNTED) or {}
    duration_ms = p.get("batchDuration") or (p.get("durationMs") or {}).get("triggerExecution", 0)
    ops = p.get("stateOperators") or []
    valid = sum(sum(span.values()) for span in spans) - int(written.get(dead_letter_topic, 0))
    unchanged = ops and not any(op.get("numRowsUpdated") for op in ops) and not any(
        written.get(t) for t in output_topics if t != dead_letter_topic)
    return BatchStatus(
        batch=p["batchId"],
        # the source's offsets name the topics as the broker does (a participant's: joinlab.topics.own)
        records_in={t: sum(span.get(own(t), 0) for span in spans) for t in input_topics},
        records_out={t: int(written.get(t, 0)) for t in output_topics if t != dead_letter_topic},
        dead_letters=int(written.get(dead_letter_topic, 0)) if dead_letter_topic else 0,
        duration_s=duration_ms / 1000,
        watermark=(p.get("eventTime") or {}).get("watermark"),
        state_rows=[op["numRowsTotal"] for op in ops],
        timestamp=p.get("timestamp", ""),
        old_versions=max(valid, 0) if unchanged else 0)


class Watcher:
    """Turns a query's recent progress into one BatchStatus per executed micro-batch, each once."""

    def __init__(self, job: types.ModuleType):
        self.topics = list(job.INPUT_TOPICS), list(job.OUTPUT_TOPICS), getattr(job, "DEAD_LETTERS_TOPIC", None)
        self.last_batch = -1

    def new(self, recent: Iterable[Any]) -> list[BatchStatus]:
        fresh = []
        for p in map(as_dict, recent):
            # Only micro-batches that ran (with input, or a no-data batch that moves the watermark)
            # have an addBatch phase; Spark also reports idle triggers, which ran nothing.
            if p.get("batchId", -1) > self.last_batch and "addBatch" in (p.get("durationMs") or {}):
                fresh.append(batch_status(p, *self.topics))
                self.last_batch = p["batchId"]
        return fresh


NO_EXECUTOR_S = 5.0  # longer than a lost executor takes to be replaced on a live worker


class ExecutorWatch:
    """Says once when a job on a Spark cluster has lost its executors for NO_EXECUTOR_S, and once
    when one is back. Why: when the Spark worker dies the query neither fails nor says anything
    after Spark's one "Lost executor" line; its batch waits for a worker, forever if none comes.
    Quiet before the first executor: Spark warns then itself. `count()` gives the executors now,
    None in local mode (the driver runs the tasks)."""

    def __init__(self, count, label: str, out):
        self.count, self.label, self.out = count, label, out
        self.seen = False  # has the job had an executor yet?
        self.since: float | None = None  # when the executors were last seen gone
        self.told = False

    def check(self, now: float) -> None:
        n = self.count()
        if n is None or (n == 0 and not self.seen):
            return
        if n > 0:
            if self.told:
                self.out(f"{self.label}: a Spark executor is back ({n}); the job goes on")
            self.seen, self.since, self.told = True, None, False
            return
        self.since = now if self.since is None else self.since
        if not self.told and now - self.since >= NO_EXECUTOR_S:
            self.out(f"{self.label}: no Spark executor has run this job for {now - self.since:.0f} s, so it waits "
                     "(is the Spark worker gone? `joinlab lab ps` shows it); it goes on once a worker registers: "
                     "`joinlab lab up` (`make up`) starts a missing one")
            self.told = True


def follow(query, job: types.ModuleType, label: str, shown: str, executors) -> None:
    """Until `query` ends or Ctrl-C stops it: each executed micro-batch as a status line
    (`shown="line"`, after `label`), a JSON object (`"json"`) or nothing (`"quiet"`); and a line on
    stderr when `executors()` (joinlab.spark.executors) says the job has had none for a while.

    Ctrl-C only sets a flag here, and the loop stops the query between batches
    (joinlab.runner.stop_between_batches), not in the middle of the client's call to the server."""
    watcher = Watcher(job)
    interrupted = threading.Event()
    watch = ExecutorWatch(executors, label, lambda text: print(text, file=sys.stderr, flush=True))

    def report() -> None:
        for status in watcher.new(query.recentProgress):
            if shown != "quiet":
                print(status.json() if shown == "json" else f"{label} {status.line()}", flush=True)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set()) if in_main else None
    try:
        while not interrupted.is_set() and not query.awaitTermination(0.5):
            report()
            watch.check(time.monotonic())
        if interrupted.is_set():
            print(f"{label}: stopping after the running batch (Ctrl-C)", file=sys.stderr, flush=True)
            stop_between_batches(query)
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    report()
