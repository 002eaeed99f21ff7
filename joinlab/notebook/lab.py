"""`Lab(pattern)`: one object per pattern, so that every notebook cell is a line or two."""
from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from typing import Any, Callable, Iterable

import pandas as pd

import joinlab.notebook.progress as query_progress
from joinlab import runner
from joinlab import patterns
from joinlab import checkpoint_state as state_source
from joinlab.config import checkpoints, lab_home, on_server, query_name, topic_prefix
from joinlab.generate import Disorder, Record, Records, continued, send
from joinlab.notebook.env import connect, setting
from joinlab.notebook.feed import Feed
from joinlab.notebook.peek import frame, topic_ends
from joinlab.notebook.progress import wait_until
from joinlab.spark import executors, session, stop, ui_url
from joinlab.status import as_dict, offsets
from joinlab.topics import NoSuchTopic
from joinlab.topics import Consumed
from joinlab.topics import create_topics, own, owned, read_topics, tail
from joinlab.verify import check

# Out of order, with duplicates and a few malformed records, as in `make demo`.
DEFAULT_DISORDER = Disorder(delayed=0.2, max_delay_s=5.0, duplicates=0.05, malformed=0.01)
# A notebook's job writes its output topics under this prefix: a `joinlab run` of the same pattern
# may run beside it on the same inputs, and neither job's output, nor its check, mixes with the other's.
# In a room a participant's name goes before it, as before every topic of theirs (joinlab.topics.own):
# `alice.notebook-tweet-views`.
OUTPUT_PREFIX = "notebook-"


class Lab:
    """A pattern's topics, generator, job, state and reference, for a notebook."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.job = patterns.job(pattern)
        self.generator = patterns.generator(pattern)
        self.reference = patterns.reference(pattern)
        self.bootstrap = connect()
        self.checkpoint = str(lab_home() / "notebooks" / patterns.module_name(pattern) / "checkpoint")
        self.query_name = query_name("notebook_" + patterns.module_name(pattern))
        self.spark = None
        self.query = None
        self.feed: Feed | None = None
        self.services = None  # the lookup service the job asks (its LOOKUP), open while it runs
        self.topics = patterns.all_topics(pattern)
        self.outputs = {t: own(OUTPUT_PREFIX + t) for t in self.job.OUTPUT_TOPICS}  # the pattern's name -> this job's
        # The pattern's name of each of its topics -> the name on the broker, which the cells never need
        # to know: they name topics as the pattern does, and read records named so (`_named`).
        self.names = {**{t: own(t) for t in self.job.INPUT_TOPICS}, **self.outputs}
        self.target: dict | None = None  # the input ends `caught_up` waits for (taken when it is first asked)

    def __repr__(self) -> str:
        return (f"<Lab {self.pattern}: broker {self.bootstrap}, inputs {', '.join(owned(self.job.INPUT_TOPICS))}, "
                f"outputs {', '.join(self.outputs.values())}>")

    # --- topics
    def create_topics(self) -> dict[str, int]:
        create_topics(self.bootstrap, [self.names[t] for t in self.topics])
        return self.counts()

    def counts(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        """Records per topic right now (end offsets; the topics are never compacted or trimmed). An
        output topic is named as the pattern names it and counted where this notebook's job writes it."""
        topics = list(topics or self.topics)
        ends = topic_ends(self.bootstrap, [self.names.get(t, t) for t in topics])
        return {t: sum(ends.get(self.names.get(t, t), {}).values()) for t in topics}

    def peek(self, topic: str, n: int = 5, columns: list[str] | None = None) -> pd.DataFrame:
        """The latest `n` records of `topic` (by Kafka timestamp, across partitions), newest last."""
        try:
            df = frame(self._named(tail(self.bootstrap, self.names.get(topic, topic), n)))
        except NoSuchTopic:
            df = frame([])
        if columns:  # plus `raw`, the value of records that are not JSON objects, if any
            df = df[[c for c in columns if c in df.columns] + (["raw"] if "raw" in df.columns else [])]
        return df

    def records(self, topics: Iterable[str] | None = None) -> list[Consumed]:
        """Every record of `topics`, in the order they reached the broker (Kafka timestamp, then
        offset): reading topics whole returns them partition by partition, and a replay of the
        events (e.g. the car-pollution alternatives) needs the order they were sent in."""
        records = self._named(read_topics(self.bootstrap, [self.names.get(t, t) for t in topics or self.topics]))
        return sorted(records, key=lambda r: (r.timestamp_ms, r.topic, r.partition, r.offset))

    def _named(self, records: Iterable[Consumed]) -> list[Consumed]:
        """`records` with this lab's topics named as the pattern names them (what the cells use)."""
        pattern_name = {mine: name for name, mine in self.names.items()}
        return [replace(r, topic=pattern_name.get(r.topic, r.topic)) for r in records]

    def read(self, *topics: str) -> pd.DataFrame:
        """Every record of `topics` (default: all the pattern's topics) as one table."""
        return frame(self.records(topics or None))

    def send(self, topic: str, key: Any, value: dict) -> None:
        """Produce one JSON record (e.g. a hand-made update) to `topic`, named as the pattern names it,
        and wait for its acknowledgement."""
        body = json.dumps(value, separators=(",", ":")).encode()
        send(self.bootstrap, [Record(own(topic), str(key).encode(), body, "event")], progress=False)
        self.target = None  # `caught_up` now waits for this record too

    def latest_outputs(self) -> pd.DataFrame:
        """The reference module's `actual`: the last output per key, one row each."""
        last = self.reference.actual(self.records(self.job.OUTPUT_TOPICS))
        return pd.DataFrame(list(last.values()))

    def timeline(self, freq: str = "1s", since: pd.Timestamp | None = None) -> pd.DataFrame:
        """Cumulative records per topic over wall time (Kafka timestamps), one row per `freq`;
        `since` leaves out older records (e.g. `feed.started_at`, on a broker you reuse)."""
        return query_progress.timeline(self.read(), self.topics, freq, since)

    # --- the generator
    def start_generator(self, count: int, rate: float) -> Feed:
        """The pattern's generator (`stream(7, count, disorder=DEFAULT_DISORDER, rate=rate)`: its records
        made as they are sent) at `rate` records/s in the background; `rate` also sets the
        generator's event-time clock. Its
        records continue after what the input topics hold (new ids, later event times:
        joinlab.generate.Continuation), as `joinlab generate` without --seed does."""
        if self.feed and not self.feed.done:
            print(f"a generator is already running: {self.feed!r}")
            return self.feed
        records = self.continue_after(self.generator.stream(7, count, disorder=DEFAULT_DISORDER, rate=rate),
                                      lambda line: print(line.replace("this run", "this generator")))
        self.feed = Feed(self.bootstrap, records, rate)
        return self.feed

    def continue_after(self, records: list[Record] | Records,
                       say: Callable[[str], Any] = print) -> list[Record] | Records:
        """`records` continued after what this lab's input topics hold (joinlab.generate.continued:
        new ids, later event times), which `say` hears; as they are on topics that hold nothing."""
        return continued(self.bootstrap, owned(self.job.INPUT_TOPICS), records, say)

    # --- Spark and the job
    def start_job(self, trigger: str = "2 seconds", max_offsets_per_trigger: int | None = None, solution=None):
        """Start the job in this kernel's Spark session (kept for the rest of the notebook) on an empty
        checkpoint (it reads the input topics from the beginning; an old checkpoint may name offsets of
        a broker that no longer exists), or attach to it if it already runs. `solution`: the module
        its processors come from (a candidate's; None: the lab's own)."""
        if self.spark is None:
            os.environ.setdefault("LAB_SPARK_LOG_LEVEL", "ERROR")  # a server this kernel starts: no WARN in the cells
            self.spark = session(f"notebook-{self.pattern}", **{"spark.sql.streaming.numRecentProgressUpdates": "1000"})
            if ui := ui_url(self.spark):
                print(f"Spark UI {ui} (Structured Streaming tab: rates, durations, state, watermark)")
        running = [q for q in self.spark.streams.active if q.name == self.query_name]
        if running:
            self.query = running[0]
            print(f"attached to the running query {self.query_name} (id {self.query.id})")
            return self.query
        if on_server(checkpoints()):  # the server's side: the lab deletes nothing there, it starts anew
            self.checkpoint = runner.new_checkpoint(f"notebook-{patterns.module_name(self.pattern)}")
        else:
            runner.fresh_checkpoint(self.checkpoint)
        if self.services is None:
            self.services = runner.services(self.job, self.bootstrap)
            self.services.__enter__()
        self.query = runner.start(self.spark, self.job, self.bootstrap, self.checkpoint, counted=True,
                                  trigger_interval=trigger, max_offsets_per_trigger=max_offsets_per_trigger,
                                  name=self.query_name, solution=solution, input_prefix=topic_prefix(),
                                  output_prefix=own(OUTPUT_PREFIX))
        print(f"started {self.query_name}: trigger every {trigger}, checkpoint {self.checkpoint}")
        return self.query

    def _last_progress(self) -> dict:
        return as_dict(self.query.lastProgress if self.query else None)

    def check_query(self) -> None:
        """Raise the query's error if it stopped with one."""
        if self.query is not None and not self.query.isActive and self.query.exception():
            raise RuntimeError(f"the query failed: {self.query.exception()}")

    def wait_until(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """`wait_until`, giving up at once if the query fails."""
        return wait_until(condition, timeout_s, what, check=self.check_query)

    def _done(self) -> dict:
        """The input offsets the job's last finished micro-batch read up to."""
        last = self._last_progress()
        return offsets(last["sources"][0]["endOffset"]) if last.get("sources") else {}

    def caught_up(self) -> bool:
        """True when the job has read every input record that was there when this was first asked
        (again after this notebook sent one, and on every call while its generator sends): not
        what others send meanwhile, e.g. a generator in a terminal, whose end would keep moving."""
        if self.target is None or (self.feed and not self.feed.done):
            self.target = topic_ends(self.bootstrap, owned(self.job.INPUT_TOPICS))  # as the job's offsets name them
        done = self._done()
        if all(int(done.get(t, {}).get(p, 0)) >= end for t, parts in self.target.items() for p, end in parts.items()):
            self.target = None
            return True
        return False

    def wait_caught_up(self, timeout_s: float = 180) -> None:
        try:
            self.wait_until(self.caught_up, timeout_s, "the job to catch up with its input topics")
        except TimeoutError:
            raise TimeoutError(self.behind(timeout_s)) from None

    def behind(self, waited_s: float) -> str:
        """Why the job has not caught up yet, and what to do, in words."""
        done, target = self._done(), self.target or {}
        left = sum(max(0, end - int(done.get(t, {}).get(p, 0)))
                   for t, parts in target.items() for p, end in parts.items())
        more = sum(self.counts(self.job.INPUT_TOPICS).values()) - sum(sum(parts.values()) for parts in target.values())
        return " ".join([
            f"after {waited_s:.0f} s the job still has {left} input records to read of those there when this started.",
            "The lab's Spark server has no executor: is the Spark worker up (`make ps`; `make up` starts a missing "
            "one)? The job goes on once one registers." if self.spark is not None and executors(self.spark) == 0 else
            "It shares the lab's Spark server with every other job of the room (a `joinlab run`, other notebooks): "
            "run the cell again to wait longer.",
            f"{more} more came meanwhile from elsewhere (a generator in a terminal?); it does not wait for those, but "
            f"reads them too: `joinlab lab down gen-{self.pattern}` stops a background generator." if more > 0 else ""])

    def progress(self) -> pd.DataFrame:
        """One row per micro-batch that ran (from `query.recentProgress`): records read per input
        topic and in all, written per output topic, dead letters, duration, watermark, state rows and memory."""
        return query_progress.batches(self.job, self.query.recentProgress if self.query else [])

    def watch(self, until: Callable[[], Any] | None = None, timeout_s: float = 30) -> None:
        """A live table of the last 8 micro-batches (the numbers of `joinlab run`'s status line),
        updated in place every second until `until()` is true or `timeout_s` has passed (no
        error then: it is something to look at)."""
        from IPython.display import display
        handle = display(pd.DataFrame(), display_id=True)
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_query()
            handle.update(self.progress().tail(8))
            if (until and until()) or time.monotonic() > deadline:
                return
            time.sleep(1)

    # --- state
    def state_metadata(self) -> pd.DataFrame:
        """The stateful operators of the checkpoint (Spark's `state-metadata` source), with the
        state variables of transformWithState operators."""
        return self._read_state("the state metadata", lambda: state_source.metadata(self.spark, self.checkpoint))

    def state(self, var: str | None = None, operator_id: int | None = None, side: str | None = None) -> pd.DataFrame:
        """The job's state at its last committed batch, key and value columns flattened. `var`
        names a transformWithState state variable (`stateVarName`); map and list variables come one
        row per entry. `side` ("left" or "right", `joinSide`) reads the rows one side of a
        stream-stream join keeps. `operator_id` defaults to the operator that declares `var` (see
        `operator_of`), else 0.

        If Spark cannot read it, this prints why and the state operators' metrics from the last
        progress instead, and returns an empty table ($LAB_NOTEBOOK_STRICT=1 raises, as in tests)."""
        def read() -> pd.DataFrame:
            op = operator_id if operator_id is not None else self.operator_of(var) if var else 0
            return state_source.read(self.spark, self.checkpoint, var, op, **({"joinSide": side} if side else {}))
        where = "" if var and operator_id is None else f" of operator {operator_id or 0}"
        what = f"state variable {var!r}" if var else f"the join's {side} side" if side else "the state"
        return self._read_state(what + where, read)

    def operator_of(self, var: str) -> int:
        """The id of the stateful operator that declares state variable `var` (from the
        checkpoint's state metadata; with chained operators the last stage is operator 0)."""
        return state_source.operator_of(self.spark, self.checkpoint, var)

    def _read_state(self, what: str, read: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        try:
            return read()
        except Exception as exc:
            if setting("strict", 0):
                raise
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(f"could not read {what} from {self.checkpoint}: {reason}")
            for op in self._last_progress().get("stateOperators", []):
                print(f"  the last micro-batch reports {op['operatorName']}: {op['numRowsTotal']} rows, "
                      f"{op['memoryUsedBytes'] / 1024:.0f} KiB")
            return pd.DataFrame()

    # --- the reference, and stopping
    def verify(self):
        """Compare this job's output with the batch reference of the input it has read (its last
        finished micro-batch's offsets): what others send meanwhile is not counted against it, and
        neither is what the micro-batch running now writes. Prints the report and returns it."""
        last = self._last_progress()
        if not last:
            raise RuntimeError("the job has not finished a micro-batch yet: run `lab.wait_caught_up()` first")
        finished_ms = pd.Timestamp(last["timestamp"]).value // 10**6 + last["durationMs"]["triggerExecution"]
        inputs = self._named(read_topics(self.bootstrap, owned(self.job.INPUT_TOPICS), upto=self._done()))
        outputs = [r for r in self.records(self.job.OUTPUT_TOPICS) if r.timestamp_ms <= finished_ms]
        report = check(self.pattern, inputs, outputs)
        print("\n".join(report.lines()))
        return report

    def stop(self) -> None:
        """Stop the generator, the query, the services the job called and the Spark session."""
        if self.feed:
            self.feed.stop()
        if self.spark is not None and self.query is not None and self.query.isActive:
            runner.stop_between_batches(self.query)
        # asked of the server, so before the session ends (a query of an ended session is not active)
        active = bool(self.spark is not None and self.query and self.query.isActive)
        if self.services is not None:
            self.services.__exit__(None, None, None)
            self.services = None
        if self.spark is not None:
            stop(self.spark)
            self.spark = None
        print(f"stopped: generator {self.feed!r}, query active: {active}")
