"""Helpers for the live notebooks in notebooks/: one `Lab` per pattern keeps the cells short.

    lab = Lab("tweet-views")            # connects to the broker (starts the background one if none)
    lab.create_topics()
    feed = lab.start_generator(count=3000, rate=100)   # a background thread, bounded
    query = lab.start_job()             # or attaches to the one already running in this kernel
    lab.peek("tweet-views", 5)          # the latest records of a topic, as a pandas DataFrame
    lab.wait_until(lambda: ..., 120, "what we wait for")
    lab.state("user")                   # the job's state, through Spark's state data source
    lab.verify()                        # the output topic against the batch reference
    lab.stop()

Nothing here knows a pattern: everything comes from the pattern's job, generator and reference
modules (joinlab.patterns). Sizes come from the environment so that `make test` can run the same
notebook small and fast: LAB_NOTEBOOK_EVENTS, LAB_NOTEBOOK_RATE (see `setting`).
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from joinlab import patterns
from joinlab.generate import Disorder, Record, send
from joinlab.topics import Record as TopicRecord
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer, read_topics

# Out of order, with duplicates and a few malformed records, as in `make demo`.
DEFAULT_DISORDER = Disorder(delayed=0.2, max_delay_s=5.0, duplicates=0.05, malformed=0.01)
OBSERVED = "records_out"  # the name of the per-output-topic counts in each micro-batch's progress


def _project_root() -> Path | None:
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").exists() else None


def _default_lab_home() -> None:
    """Jupyter runs a kernel in the notebook's folder; lab state (broker.json, checkpoints) lives
    in the project's .lab/, so point LAB_HOME there unless it is set."""
    root = _project_root()
    if root is not None and "LAB_HOME" not in os.environ:
        os.environ["LAB_HOME"] = str(root / ".lab")


_default_lab_home()


def setting(name: str, default: float) -> Any:
    """$LAB_NOTEBOOK_<NAME> if set (e.g. LAB_NOTEBOOK_EVENTS=400 in tests), else `default`."""
    raw = os.environ.get(f"LAB_NOTEBOOK_{name.upper()}")
    if raw is None:
        return default
    return type(default)(float(raw)) if isinstance(default, int) else float(raw)


def connect() -> str:
    """The broker's bootstrap servers: $KAFKA_BOOTSTRAP_SERVERS, else the background embedded
    broker (`make up` / `joinlab broker start`), which is started here if none runs."""
    from joinlab import broker
    try:
        return broker.bootstrap_servers()
    except broker.BrokerError:
        info = broker.start_background()
        print(f"started the embedded broker at {info.bootstrap_servers} (stop it: `joinlab broker stop`)")
        return info.bootstrap_servers


def wait_until(condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.25,
               check: Callable[[], None] | None = None) -> Any:
    """Poll `condition` until it returns something truthy (returned); TimeoutError after `timeout_s`.
    `check` runs on every poll and may raise to give up early (e.g. the query failed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check:
            check()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


# --- Records as tables ------------------------------------------------------------------------

def _decode(value: bytes | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except (UnicodeDecodeError, ValueError):
        return None


def frame(records: Iterable[TopicRecord]) -> pd.DataFrame:
    """Records as a table: topic, partition, offset, time (Kafka timestamp), key, then the JSON
    value's fields flattened (`author.name`); a value that is not a JSON object stays in `raw`."""
    meta, bodies = [], []
    for r in records:
        body = _decode(r.value)
        meta.append({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                     "time": pd.Timestamp(r.timestamp_ms, unit="ms", tz="UTC"),
                     "key": r.key.decode("utf-8", "replace") if r.key is not None else None,
                     "raw": None if isinstance(body, dict) else (r.value or b"").decode("utf-8", "replace")})
        bodies.append(body if isinstance(body, dict) else {})
    df = pd.DataFrame(meta, columns=["topic", "partition", "offset", "time", "key", "raw"])
    if bodies:
        fields = pd.json_normalize(bodies).convert_dtypes()  # ids stay integers next to a malformed row
        fields.columns = [f"value.{c}" if c in df.columns else c for c in fields.columns]
        df = pd.concat([df, fields], axis=1)
    return df if df["raw"].notna().any() else df.drop(columns="raw")


def topic_ends(bootstrap: str, topics: Iterable[str]) -> dict[str, dict[str, int]]:
    """{topic: {partition: next offset}}, the same shape as a Spark Kafka source's offsets."""
    consumer = plain_consumer(bootstrap)
    try:
        ends = end_offsets(consumer, partitions_of(consumer, topics))
    finally:
        consumer.close()
    out: dict[str, dict[str, int]] = {}
    for tp, offset in ends.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out


def latest_records(bootstrap: str, topic: str, n: int) -> list[TopicRecord]:
    """The last `n` records of `topic` (by Kafka timestamp, across partitions)."""
    consumer = plain_consumer(bootstrap)
    try:
        tps = partitions_of(consumer, [topic])
        ends = end_offsets(consumer, tps)
        starts = consumer.beginning_offsets(tps)
        pending = {tp for tp in tps if ends[tp] > starts[tp]}
        consumer.assign(list(pending))
        for tp in pending:
            consumer.seek(tp, max(starts[tp], ends[tp] - n))
        out: list[TopicRecord] = []
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for tp, batch in consumer.poll(timeout_ms=200).items():
                out += [TopicRecord(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)
                        for r in batch if r.offset < ends[tp]]
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
    finally:
        consumer.close()
    out.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    return out[-n:]


# --- The generator in a background thread ------------------------------------------------------

class Feed:
    """Sends `records` at `rate` records/s in a daemon thread, one second's worth at a time, so
    it can be stopped between chunks. `pending()` are the records not acknowledged yet."""

    def __init__(self, bootstrap: str, records: list[Record], rate: float | None):
        self.bootstrap, self.records, self.rate = bootstrap, records, rate
        self.sent, self.error = 0, None
        self.started_at = pd.Timestamp.now(tz="UTC")  # compare with Kafka timestamps (`timeline(since=...)`)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lab-generator", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        step = max(1, int(self.rate)) if self.rate else len(self.records) or 1
        try:
            for i in range(0, len(self.records), step):
                if self._stop.is_set():
                    return
                chunk = self.records[i:i + step]
                send(self.bootstrap, chunk, rate=self.rate, progress=False)
                self.sent += len(chunk)
        except Exception as exc:  # shown by wait() and repr, never lost
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def pending(self) -> list[Record]:
        return self.records[self.sent:]

    def wait(self, timeout_s: float = 300) -> "Feed":
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TimeoutError(f"the generator is still sending after {timeout_s:.0f}s: {self!r}")
        if self.error:
            raise RuntimeError(f"the generator failed: {self.error!r}") from self.error
        return self

    def stop(self, timeout_s: float = 30) -> None:
        self._stop.set()
        self.thread.join(timeout_s)

    def __repr__(self) -> str:
        state = "failed: " + repr(self.error) if self.error else ("done" if self.done else "sending")
        rate = f" at {self.rate:g}/s" if self.rate else ""
        return f"<Feed {self.sent}/{len(self.records)} records sent{rate}, {state}>"


# --- One pattern in a notebook ----------------------------------------------------------------

class Lab:
    """A pattern's topics, generator, job, state and reference, for a notebook."""

    def __init__(self, pattern: str, bootstrap: str | None = None):
        from joinlab.config import lab_home
        self.pattern = pattern
        self.job = patterns.job(pattern)
        self.generator = patterns.generator(pattern)
        self.reference = patterns.reference(pattern)
        self.bootstrap = bootstrap or connect()
        self.checkpoint = str(lab_home() / "notebooks" / patterns.module_name(pattern) / "checkpoint")
        self.query_name = "notebook_" + patterns.module_name(pattern)
        self.spark = None
        self.query = None
        self.feed: Feed | None = None

    def __repr__(self) -> str:
        return (f"<Lab {self.pattern}: broker {self.bootstrap}, inputs {', '.join(self.job.INPUT_TOPICS)}, "
                f"outputs {', '.join(self.job.OUTPUT_TOPICS)}>")

    @property
    def topics(self) -> list[str]:
        return list(self.job.INPUT_TOPICS) + list(self.job.OUTPUT_TOPICS)

    def create_topics(self) -> dict[str, int]:
        create_topics(self.bootstrap, self.topics)
        return self.counts()

    # --- topics
    def counts(self, topics: Iterable[str] | None = None) -> dict[str, int]:
        """Records per topic right now (end offsets; the topics are never compacted or trimmed)."""
        ends = topic_ends(self.bootstrap, topics or self.topics)
        return {t: sum(ends.get(t, {}).values()) for t in (topics or self.topics)}

    def peek(self, topic: str, n: int = 5, columns: list[str] | None = None) -> pd.DataFrame:
        """The latest `n` records of `topic`, newest last."""
        df = frame(latest_records(self.bootstrap, topic, n))
        if columns:  # plus `raw`, the value of records that are not JSON objects, if any
            df = df[[c for c in columns if c in df.columns] + (["raw"] if "raw" in df.columns else [])]
        return df

    def records(self, topics: Iterable[str] | None = None) -> list[TopicRecord]:
        return read_topics(self.bootstrap, list(topics or self.topics))

    def read(self, *topics: str) -> pd.DataFrame:
        """Every record of `topics` (default: all the pattern's topics) as one table."""
        return frame(self.records(topics or None))

    def send(self, topic: str, key: Any, value: dict) -> None:
        """Produce one JSON record (e.g. a hand-made update) and wait for its acknowledgement."""
        body = json.dumps(value, separators=(",", ":")).encode()
        send(self.bootstrap, [Record(topic, str(key).encode(), body, "event")], progress=False)

    def latest_outputs(self) -> pd.DataFrame:
        """The reference module's `actual`: the last output per key, one row each."""
        last = self.reference.actual(self.records(self.job.OUTPUT_TOPICS))
        return pd.DataFrame(list(last.values()))

    def timeline(self, freq: str = "1s", since: pd.Timestamp | None = None) -> pd.DataFrame:
        """Cumulative records per topic over wall time (Kafka timestamps), one row per `freq`;
        `since` leaves out older records (e.g. `feed.started_at`, on a broker you reuse)."""
        df = self.read()
        if since is not None and not df.empty:
            df = df[df["time"] >= since - pd.Timedelta(freq)]
        if df.empty:
            return pd.DataFrame(columns=self.topics)
        step = pd.Timedelta(freq).total_seconds()
        start = df["time"].min().floor(freq)
        df = df.assign(t=(df["time"].dt.floor(freq) - start).dt.total_seconds())
        counts = df.groupby(["t", "topic"]).size().unstack(fill_value=0)
        counts = counts.reindex(columns=[t for t in self.topics if t in counts.columns])
        index = pd.Index([i * step for i in range(round(counts.index.max() / step) + 1)], name="seconds")
        return counts.reindex(index, fill_value=0).cumsum()

    # --- the generator
    def start_generator(self, count: int, rate: float | None, seed: int = 7,
                        disorder: Disorder = DEFAULT_DISORDER, **options) -> Feed:
        """The pattern's generator (`generate(seed, count, ...)`) sent at `rate` records/s in the
        background. `rate` also sets the event-time clock when the generator takes one."""
        if self.feed and not self.feed.done:
            print(f"a generator is already running: {self.feed!r}")
            return self.feed
        accepted = inspect.signature(self.generator.generate).parameters
        if "disorder" in accepted:
            options.setdefault("disorder", disorder)
        if rate and "rate" in accepted:
            options.setdefault("rate", rate)
        records = self.generator.generate(seed, count, **options)
        self.feed = Feed(self.bootstrap, records, rate)
        return self.feed

    # --- Spark and the job
    def start_spark(self):
        """The lab's Spark session (RocksDB state store), kept for the rest of the notebook."""
        from joinlab.spark import session
        os.environ.setdefault("LAB_SPARK_LOG_LEVEL", "ERROR")  # keep WARN lines out of the cells
        self.spark = session(f"notebook-{self.pattern}",
                             **{"spark.sql.streaming.numRecentProgressUpdates": "1000"})
        return self.spark

    def _observed_job(self) -> types.SimpleNamespace:
        """The job with a count of records per output topic in every micro-batch's progress."""
        from pyspark.sql import functions as F
        job = self.job

        def build(raw):
            out = job.build(raw)
            return out.observe(OBSERVED, *[F.count_if(F.col("topic") == t).alias(t) for t in job.OUTPUT_TOPICS])
        return types.SimpleNamespace(INPUT_TOPICS=job.INPUT_TOPICS, OUTPUT_TOPICS=job.OUTPUT_TOPICS, build=build)

    def start_job(self, trigger: str = "2 seconds", max_offsets_per_trigger: int | None = None,
                  fresh: bool = True):
        """Start the job in this kernel's Spark session, or attach to it if it already runs.

        fresh: start from an empty checkpoint (reads the input topics from the beginning; an old
        checkpoint may name offsets of a broker that no longer exists)."""
        from joinlab import job as runner
        spark = self.spark or self.start_spark()
        running = [q for q in spark.streams.active if q.name == self.query_name]
        if running:
            self.query = running[0]
            print(f"attached to the running query {self.query_name} (id {self.query.id})")
            return self.query
        if fresh:
            shutil.rmtree(self.checkpoint, ignore_errors=True)
        self.query = runner.start(spark, self._observed_job(), self.bootstrap, self.checkpoint,
                                  trigger_interval=trigger, max_offsets_per_trigger=max_offsets_per_trigger,
                                  name=self.query_name)
        print(f"started {self.query_name}: trigger every {trigger}, checkpoint {self.checkpoint}")
        return self.query

    def check_query(self) -> None:
        """Raise the query's error if it stopped with one."""
        if self.query is not None and not self.query.isActive and self.query.exception():
            raise RuntimeError(f"the query failed: {self.query.exception()}")

    def wait_until(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """`wait_until`, giving up at once if the query fails."""
        return wait_until(condition, timeout_s, what, check=self.check_query)

    def caught_up(self) -> bool:
        """True when the last micro-batch read up to the current end of every input topic."""
        last = self.query.lastProgress if self.query else None
        progress = json.loads(last.json) if hasattr(last, "json") else last
        if not progress or not progress.get("sources"):
            return False
        done = progress["sources"][0]["endOffset"]
        done = json.loads(done) if isinstance(done, str) else done
        ends = topic_ends(self.bootstrap, self.job.INPUT_TOPICS)
        return all(int((done or {}).get(t, {}).get(p, 0)) >= end for t, parts in ends.items()
                   for p, end in parts.items())

    def wait_caught_up(self, timeout_s: float = 180) -> None:
        self.wait_until(self.caught_up, timeout_s, "the job to catch up with its input topics")

    def progress(self) -> pd.DataFrame:
        """One row per micro-batch with input (from `query.recentProgress`): records read, records
        written per output topic, duration, and the state operators' rows and memory.

        "records in" comes from the source's start and end offsets: Spark's numInputRows counts
        a source once per scan, and a job that reads its input in two branches (events and dead
        letters) scans it twice."""
        rows = []
        for p in (self.query.recentProgress if self.query else []):
            p = json.loads(p.json) if hasattr(p, "json") else p
            if not p.get("numInputRows"):
                continue
            row = {"batch": p["batchId"], "time": pd.Timestamp(p["timestamp"]),
                   "records in": sum(_offset_span(src) for src in p.get("sources", [])),
                   "duration s": p.get("batchDuration", p["durationMs"].get("triggerExecution", 0)) / 1000}
            for topic, n in ((p.get("observedMetrics") or {}).get(OBSERVED) or {}).items():
                row[f"out {topic}"] = n
            ops = p.get("stateOperators") or []
            if ops:
                row["state rows"] = sum(op["numRowsTotal"] for op in ops)
                row["state rows updated"] = sum(op["numRowsUpdated"] for op in ops)
                row["state memory KiB"] = sum(op["memoryUsedBytes"] for op in ops) / 1024
            rows.append(row)
        return pd.DataFrame(rows).set_index("batch") if rows else pd.DataFrame()

    # --- state
    def state_metadata(self) -> pd.DataFrame:
        """The stateful operators of the checkpoint (Spark's `state-metadata` source), with the
        state variables of transformWithState operators."""
        def read() -> pd.DataFrame:
            df = self.spark.read.format("state-metadata").load(self.checkpoint).toPandas()
            df["stateVariables"] = [_state_variables(props) for props in df["operatorProperties"]]
            return df[["operatorId", "operatorName", "numPartitions", "minBatchId", "maxBatchId", "stateVariables"]]
        return self._read_state("the state metadata", read)

    def state(self, var: str | None = None, operator_id: int = 0, batch_id: int | None = None,
              **options: str) -> pd.DataFrame:
        """The job's state at its last committed batch (or `batch_id`), key and value columns
        flattened. `var` names a transformWithState state variable (`stateVarName`); map and list
        variables come one row per entry. Other operators take Spark's options (e.g. joinSide).

        If Spark cannot read it, this prints why and the state operators' metrics from the last
        progress instead, and returns an empty table ($LAB_NOTEBOOK_STRICT=1 raises, as in tests)."""
        from pyspark.sql import functions as F

        def read() -> pd.DataFrame:
            reader = self.spark.read.format("statestore").option("operatorId", str(operator_id))
            if var is not None:
                reader = reader.option("stateVarName", var)
            if batch_id is not None:
                reader = reader.option("batchId", str(batch_id))
            for key, value in options.items():
                reader = reader.option(key, str(value))
            df = reader.load(self.checkpoint)
            columns, seen = [], set()
            for field in df.schema.fields:  # key.user_id -> user_id, value.name -> name, ...
                if field.dataType.typeName() == "struct":
                    for sub in field.dataType.fieldNames():
                        name = sub if sub not in seen else f"{field.name}.{sub}"
                        seen.add(name)
                        columns.append(F.col(f"`{field.name}`.`{sub}`").alias(name))
                else:
                    seen.add(field.name)
                    columns.append(F.col(f"`{field.name}`"))
            return df.select(*columns).toPandas()
        return self._read_state(f"state variable {var!r}" if var else f"the state of operator {operator_id}", read)

    def _read_state(self, what: str, read: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        try:
            return read()
        except Exception as exc:
            if setting("strict", 0):
                raise
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            print(f"could not read {what} from {self.checkpoint}: {reason}")
            last = self.query.lastProgress if self.query else None
            last = json.loads(last.json) if hasattr(last, "json") else last
            for op in (last or {}).get("stateOperators", []):
                print(f"  the last micro-batch reports {op['operatorName']}: {op['numRowsTotal']} rows, "
                      f"{op['memoryUsedBytes'] / 1024:.0f} KiB")
            return pd.DataFrame()

    # --- the reference, and stopping
    def verify(self):
        """Compare the output topic with the batch reference; prints the report and returns it."""
        from joinlab.verify import verify
        report = verify(self.pattern, self.bootstrap)
        print("\n".join(report.lines()))
        return report

    def stop(self, spark: bool = True) -> None:
        """Stop the generator, the query and (by default) the Spark session."""
        if self.feed:
            self.feed.stop()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        if spark and self.spark is not None:
            self.spark.stop()
            self.spark = None
        print(f"stopped: generator {self.feed!r}, query active: "
              f"{bool(self.query and self.query.isActive)}")


def _state_variables(properties: str | None) -> list[str]:
    """'name (type)' of each state variable in a transformWithState operator's properties JSON."""
    try:
        return [f"{v['stateName']} ({v['stateVariableType']})"
                for v in json.loads(properties or "{}").get("stateVariables", [])]
    except (TypeError, ValueError, KeyError):
        return []


def rows(df: pd.DataFrame, **equal: Any) -> pd.DataFrame:
    """The rows of `df` whose columns equal the given values (all of `df` if it lacks a column,
    e.g. the empty table `Lab.state` returns when the state cannot be read)."""
    for column, value in equal.items():
        if column in df.columns:
            df = df[(df[column] == value).fillna(False).astype(bool)]
    return df


def _offsets(value) -> dict:
    return (json.loads(value) if isinstance(value, str) else value) or {}


def _offset_span(source: dict) -> int:
    """Records between a source's start and end offsets ({topic: {partition: offset}})."""
    start, end = _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))
    return sum(int(offset) - int(start.get(topic, {}).get(part, 0))
               for topic, parts in end.items() if isinstance(parts, dict) for part, offset in parts.items())


# --- Plots ------------------------------------------------------------------------------------

def plot_timeline(timeline: pd.DataFrame, title: str = "records per topic over time") -> None:
    """Cumulative records per topic against wall time."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 3.5))
    for topic in timeline.columns:
        ax.plot(timeline.index, timeline[topic], label=topic, drawstyle="steps-post")
    ax.set(xlabel="seconds since the first record", ylabel="records (cumulative)", title=title)
    ax.legend(loc="best")
    fig.tight_layout()


def plot_progress(progress: pd.DataFrame) -> None:
    """Per micro-batch: records in vs out per output topic; state rows and memory."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    if progress.empty:
        print("no micro-batch with input yet")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
    outs = [c for c in progress.columns if c.startswith("out ")]
    progress[["records in", *outs]].plot.bar(ax=left, width=0.8)
    left.set(xlabel="micro-batch", ylabel="records", title="records in vs out, per micro-batch")
    if "state rows" in progress:
        progress["state rows"].plot(ax=right, marker="o", label="state rows")
        right.set(xlabel="micro-batch", ylabel="rows", title="state size")
        right.xaxis.set_major_locator(MaxNLocator(integer=True))
        memory = right.twinx()
        progress["state memory KiB"].plot(ax=memory, marker="x", color="tab:red", label="memory KiB")
        memory.set_ylabel("memory KiB")
        right.legend(loc="upper left")
        memory.legend(loc="lower right")
    fig.tight_layout()
