"""The grader's live stage: the candidate's processors (or functions) in the pattern's real job (the same
`build()` as the lab's) on seeded, disordered events, restarted from its checkpoint, its output
compared with the batch reference as `joinlab verify` does (docs/interviewing.md, stage 2).
Where the reference is not at hand (a packed workspace), the events and what the output must end
with come from the file the pack wrote (`expectation`).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from joinlab import runner
from joinlab import patterns
from joinlab.config import topic_prefix
from joinlab.demo import DEMO_DISORDER, demo_broker
from joinlab.generate import Record, body_of, send
from joinlab.interview import exercise
from joinlab.interview.scenarios import default_settings, differences, expected, plain
from joinlab.spark import session
from joinlab.status import offsets
from joinlab.topics import addressed, create_topics, list_topics, owned, read_own, read_topics
from joinlab.verify import compare


@dataclass
class LiveResult:
    events: int = 0
    expected: int = 0
    actual: int = 0
    mismatches: int = 0
    report: list = field(default_factory=list)   # verify's report lines
    stories: list = field(default_factory=list)  # a few failed keys, each with its input and output
    batches_before_restart: int = 0
    restarted_at_batch: int | None = None
    seconds: float = 0.0
    error: str | None = None                     # the query failed: the candidate's error, shortened

    @property
    def ok(self) -> bool:
        return self.error is None and self.mismatches == 0 and self.expected > 0


def events_and_expectation(pattern: str, seed: int, count: int) -> tuple[list[Record], dict]:
    """Seeded events (with DEMO_DISORDER) and what the output must end with, by the reference."""
    records = patterns.generator(pattern).generate(seed, count, disorder=DEMO_DISORDER)
    return records, expected(pattern, records)


def write_expectation(pattern: str, path: Path, seed: int, count: int) -> None:
    records, expect = events_and_expectation(pattern, seed, count)
    body = {"pattern": pattern, "seed": seed,
            "records": [{"topic": r.topic, "key": r.key.decode(), "value": r.value.decode("utf-8", "replace"),
                         "kind": r.kind} for r in records],
            "expect": expect}
    path.write_text(json.dumps(body, separators=(",", ":")) + "\n")


def read_expectation(path: Path) -> tuple[list[Record], dict]:
    body = json.loads(path.read_text())
    records = [Record(r["topic"], r["key"].encode(), r["value"].encode(), r["kind"]) for r in body["records"]]
    return records, body["expect"]


def run(pattern: str, solution: ModuleType, *, seed: int = 7, count: int = 1200, expectation: Path | None = None,
        say=lambda message: None) -> LiveResult:
    """Run the live stage; `say` hears each step (for a person watching)."""
    began, result, job = time.monotonic(), LiveResult(), patterns.job(pattern)
    records, expect = read_expectation(expectation) if expectation else events_and_expectation(pattern, seed, count)
    result.events = len(records)
    with demo_broker() as bootstrap, default_settings():
        topics = owned(patterns.all_topics(pattern))  # a participant's own (joinlab.topics.own)
        create_topics(bootstrap, topics)
        held = [t for t in list_topics(bootstrap) if t.topic in topics and t.records]
        if held:
            result.error = (f"the live stage needs the pattern's topics empty, and {bootstrap} holds "
                            + ", ".join(f"{t.records} records on {t.topic}" for t in held)
                            + ": unset KAFKA_BOOTSTRAP_SERVERS (a fresh embedded broker is used) or empty the topics")
            return result
        send(bootstrap, addressed(records), progress=False)
        say(f"{len(records)} events on {', '.join(owned(job.INPUT_TOPICS))} at {bootstrap}; "
            f"starting the job with your {exercise(pattern).what}")
        spark = session(f"interview-{pattern}")
        # the server writes it: in a room, a folder its user may write in
        checkpoint = runner.new_checkpoint(f"interview-{pattern}")
        with runner.services(job, bootstrap):
            prefixes = {"input_prefix": topic_prefix(), "output_prefix": topic_prefix()}
            query = runner.start(spark, job, bootstrap, checkpoint, solution=solution,
                                 max_offsets_per_trigger=max(50, len(records) // 4), **prefixes)
            result.batches_before_restart = _wait_for_batches(query, 2, timeout_s=300)
            query.stop()
            result.error, progress = _failure(query), list(query.recentProgress)
            if result.error is None:
                say(f"stopped after {result.batches_before_restart} micro-batches; restarting from the checkpoint")
                query = runner.start(spark, job, bootstrap, checkpoint, solution=solution, available_now=True,
                                     **prefixes)
                query.awaitTermination()
                result.error, progress = _failure(query), progress + list(query.recentProgress)
                if query.recentProgress:
                    result.restarted_at_batch = query.recentProgress[0]["batchId"]
        if result.error is None:
            got = plain(job.actual(read_own(bootstrap, job.OUTPUT_TOPICS)))
            report = compare(pattern, expect, got, job.version)
            result.expected, result.actual, result.mismatches = report.expected, report.actual, report.mismatches
            result.report = report.lines()
            if not report.ok:
                # named as on the broker, as the progress' offsets name them
                result.stories = stories(report, expect, got, read_topics(bootstrap, owned(job.INPUT_TOPICS)),
                                         progress, result.restarted_at_batch)
    result.seconds = time.monotonic() - began
    return result


def stories(report, expect: dict, got: dict, inputs: list, progress: list, restarted_at: int | None) -> list[str]:
    """Up to three missing, stale and mismatched keys each, with their input records (those keyed by
    one of the view's ids, with that id; at most eight) in arrival order, the micro-batch each came
    in, and the view expected against the one that came out."""
    shown = 8
    spans = [(p["batchId"], topic, int(part), offsets(s["startOffset"]).get(topic, {}).get(part, 0), end)
             for p in progress for s in p["sources"] for topic, ends in offsets(s["endOffset"]).items()
             for part, end in ends.items()]
    bodies = [(r, body_of(r.value)) for r in inputs]
    out = [f"The job stopped and restarted from its checkpoint at batch {restarted_at}."] if restarted_at else []
    for kind in ("missing", "stale", "mismatched"):
        for key in sorted(getattr(report, kind))[:3]:
            ids = {(f, str(v)) for f, v in expect[key].items() if f.endswith("_id") and v is not None}
            mine = [(_batch(spans, r), r) for r, body in bodies
                    if r.key is not None and any(r.key.decode() == v == str(body.get(f)) for f, v in ids)]
            mine.sort(key=lambda m: (m[0] is None, m[0] or 0, m[1].timestamp_ms, m[1].offset))
            out += ["", f"{kind} {key}; its input, in arrival order:"]
            for b, r in mine[:shown]:
                when = "not read" if b is None else f"batch {b}" + (
                    " (after the restart)" if restarted_at is not None and b >= restarted_at else "")
                out.append(f"    {when:<27} {r.topic}[{r.partition}]@{r.offset} {r.value.decode('utf-8', 'replace')}")
            out += [f"    ... and {len(mine) - shown} more"] if len(mine) > shown else []
            out.append(f"  expected {differences(expect[key], got[key])}" if key in got else
                       f"  expected {json.dumps(expect[key], default=str)}, got nothing")
    return out


def _batch(spans: list, record) -> int | None:
    """The micro-batch whose offsets (a progress' sources) hold `record`."""
    return next((b for b, topic, part, start, end in spans
                 if (topic, part) == (record.topic, record.partition) and start <= record.offset < end), None)


def _wait_for_batches(query, batches: int, timeout_s: float) -> int:
    """Until `batches` micro-batches with input are done, the query failed, or time is up: how many are."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = len([p for p in query.recentProgress if p.numInputRows])
        if done >= batches or not query.isActive or time.monotonic() >= deadline:
            return done
        query.awaitTermination(0.2)


def _failure(query) -> str | None:
    """The query's error as a candidate needs it: the Python traceback's own lines, not the JVM's."""
    exc = query.exception()
    if exc is None:
        return None
    text = str(exc)
    start = text.find("Traceback (most recent call last)")
    lines = (text[start:] if start >= 0 else text).splitlines()
    end = next((i for i, line in enumerate(lines) if i and not line.startswith((" ", "Traceback"))), len(lines) - 1)
    return "\n".join(line for line in lines[:end + 1] if "/pyspark/" not in line)[-2000:]
