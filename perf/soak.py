"""`make soak`: every pattern at a steady rate for a while, to see whether state and memory level off.

    python -m perf.soak --minutes 10 --rate 20 --every 30

One embedded broker, one Spark session with the four jobs running side by side (as `make up`
runs them), one generator thread per pattern sending at `--rate` events/s. Every `--every`
seconds a row per pattern: state rows, RocksDB SST size (the state store's own metric), the
checkpoint's size on disk, the lag (records on the job's input topics that it has not read yet:
the broker's end offsets now minus the offsets of the job's last finished batch), and the
resident memory of the Spark JVM, of the Python processes (this one, the workers) and of the
embedded broker, each apart.

Each 10-s slice is a generator call with its own seed and its event times two days (less a
minute) after the previous slice's: longer than any pattern's waiting, windows and dedup
horizons, and a 10-minute soak spans 120 days of event time, so tweet views' state bound (tweets
within twice its 30-day retention) is reached after 5 minutes. The last slice is where the
generator puts its events and earlier ones before it, so a soak of any length stays in the past
(events later than the wall clock are dead-lettered). By default
(`--keys fixed`) the slices share their users, authors, cars, zones and lotteries and bring new
tweets, sessions, transactions and event ids, with versions and seqs moved past the previous
slice's: a steady stream over a fixed population, whose state must level off. `--keys new` gives
every slice new ids of every kind, so state grows with the keys.

Every generator sends the same number of events (whole 10-s slices), and all start together once
every job has run its first batch; the run then ends the same way every time: all generators have
sent everything, then the jobs catch up, then each pattern's output is verified against its
reference.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

from joinlab import runner
from joinlab import patterns
from joinlab import spark as lab_spark
from joinlab.broker import EmbeddedBroker
from joinlab.generate import Disorder, moved, send
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer
from joinlab.verify import verify

WITHIN_THE_DELAY = Disorder(delayed=0.3, max_delay_s=3.0, duplicates=0.05, malformed=0.01)
EXTRA = {"lottery": {"lotteries": 5, "users": 200}}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


class Memory(NamedTuple):
    """Resident memory (MiB) of the soak's processes, by kind. Apart because they answer different
    questions: the Spark JVM and the Python processes (this one, the workers) must level off under a
    steady stream; the embedded broker is a JVM of its own (Kafka, heap at most 512 MiB) that keeps
    its records on disk."""
    jvm: float
    python: float
    broker: float


def memory(broker_pid: int) -> Memory:
    import psutil
    me = psutil.Process()
    jvm = python = broker = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            rss, name = proc.memory_info().rss, proc.name()
        except psutil.Error:
            continue
        if proc.pid == broker_pid:
            broker += rss
        elif name == "java":
            jvm += rss
        else:
            python += rss
    return Memory(jvm / 2**20, python / 2**20, broker / 2**20)


def _offsets(value) -> dict:
    """A source offset from a progress report (JSON text or already parsed)."""
    return json.loads(value) if isinstance(value, str) else (value or {})


def read_to(progress: dict | None) -> dict[str, dict[str, int]]:
    """{topic: {partition: next offset}} the query's last finished batch read up to, over all its
    sources."""
    done: dict[str, dict[str, int]] = {}
    for source in (progress or {}).get("sources", []):
        for topic, parts in _offsets(source.get("endOffset")).items():
            if isinstance(parts, dict):
                done.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return done


def lag(read: dict[str, dict[str, int]], ends: dict[str, dict[str, int]]) -> int:
    """Records on the input topics (`ends`: the broker's end offsets now) beyond what the job has
    read (`read`); a partition it has not read at all counts from 0.

    Why not the progress's own latestOffset: it is the end the source saw when it planned the
    batch, and without maxOffsetsPerTrigger a batch takes all of it, so it always equals the
    batch's endOffset (lag 0) however far behind the job runs."""
    return sum(max(end - read.get(topic, {}).get(part, 0), 0)
               for topic, parts in ends.items() for part, end in parts.items())


def _ends(consumer, topics: list[str]) -> dict[str, dict[str, int]]:
    ends: dict[str, dict[str, int]] = {}
    for tp, offset in end_offsets(consumer, partitions_of(consumer, topics)).items():
        ends.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return ends


def _state(progress: dict) -> tuple[int, int]:
    ops = progress.get("stateOperators") or []
    rows = sum(op.get("numRowsTotal", 0) for op in ops)
    sst = sum(int((op.get("customMetrics") or {}).get("rocksdbSstFileSize", 0)) for op in ops)
    return rows, sst


SLICE_S = 10  # one generator call per slice, each with its own seed and later event times
# Event time between slices: past every horizon (the longest: 15 min), and a minute off whole days so
# that no slice lands exactly tweet views' retention (30 days) or its state bound (60) from another.
SLICE_SHIFT = timedelta(days=2) - timedelta(minutes=1)
VERSION_STEP = 1_000_000  # versions and seqs of a slice come after every earlier slice's (a slice has fewer)
# The population (`--keys fixed`): ids of what a pattern keeps per key for good, and the ads whose
# impressions keep coming. Every other `*_id` (tweets, sessions, transactions, events, impressions,
# clicks) is new in every slice.
ENTITY_IDS = frozenset({"user_id", "car_id", "zone_id", "to_zone_id", "lottery_id", "ad_id"})


def _generate(pattern: str, bootstrap: str, rate: float, slices: int, fixed: bool, stop: threading.Event,
              errors: list) -> None:
    """Send `slices` slices of the pattern's events at `rate`/s (each slice with its own seed, its
    event times after the previous slice's); a failure goes to `errors` (the soak then fails)."""
    generator = patterns.generator(pattern)
    try:
        for piece in range(slices):
            if stop.is_set():
                return
            records = generator.generate(1000 + piece, max(int(rate * SLICE_S), 1), disorder=WITHIN_THE_DELAY,
                                         **EXTRA.get(pattern, {}))
            send(bootstrap, _shifted(records, piece, slices, ENTITY_IDS if fixed else frozenset()), rate=rate,
                 progress=False)
    except Exception as exc:  # noqa: BLE001 - reported by the main thread, with the pattern
        errors.append(f"{pattern}: {exc!r}")


def _shifted(records: list, piece: int, slices: int, keep: frozenset = frozenset()) -> list:
    """Records of slice `piece` of `slices`, moved past earlier slices' (so a slice is new data, not a
    replay of the first one): event times by SLICE_SHIFTs, the last slice's not at all; versions and
    seqs by `piece` VERSION_STEPs; every `*_id` not in `keep` made new in every slice after the
    first (ids are strings or numbers in JSON bodies)."""
    return [moved(r, (piece - slices + 1) * SLICE_SHIFT, ids=piece * 10_000_000_000, versions=piece * VERSION_STEP,
                  keep=keep) for r in records]


def _first_batch(pattern: str, query, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not query.recentProgress:
        if query.exception() is not None:
            raise SystemExit(f"soak: {pattern} failed to start: {runner.failure(query.exception())}")
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: {pattern} made no progress in {timeout_s:.0f} s")
        time.sleep(0.5)


def _running(senders: list[threading.Thread], timeout_s: float) -> bool:
    """Wait up to `timeout_s` for every sender to finish; True while one still runs."""
    deadline = time.monotonic() + timeout_s
    for sender in senders:
        sender.join(max(deadline - time.monotonic(), 0))
    return any(s.is_alive() for s in senders)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.soak", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long the generators send (default 10)")
    p.add_argument("--rate", type=float, default=20.0, help="events per second per pattern (default 20)")
    p.add_argument("--every", type=float, default=30.0, help="seconds between report rows (default 30)")
    p.add_argument("--keys", choices=["fixed", "new"], default="fixed",
                   help="fixed (default): every slice over the same users, cars, zones and lotteries, so state "
                        "levels off; new: new ids of every kind in every slice, so state grows with them")
    p.add_argument("--patterns", nargs="*", default=list(patterns.PATTERNS), choices=list(patterns.PATTERNS))
    args = p.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="joinlab-soak-"))
    stop, errors = threading.Event(), []
    slices = max(1, round(args.minutes * 60 / SLICE_S))
    with ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(log_path=home / "broker.log"))
        bootstrap = broker.bootstrap_servers
        # Python workers connect back to the JVM within this time; on a busy machine 15 s is too short
        spark = lab_spark.session("soak")
        runner.quiet_failures(spark)
        queries, inputs = {}, {}
        for pattern in args.patterns:
            job = patterns.job(pattern)
            create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
            stack.enter_context(runner.services(job, bootstrap))
            queries[pattern] = runner.start(spark, job, bootstrap, str(home / pattern), name=pattern.replace("-", "_"),
                                            trigger_interval="2 seconds")
            inputs[pattern] = job.INPUT_TOPICS
            _first_batch(pattern, queries[pattern])  # one at a time: four starting at once strain 2 cores
        consumer = plain_consumer(bootstrap)
        stack.callback(consumer.close)
        fixed = args.keys == "fixed"
        senders = [threading.Thread(target=_generate, args=(pattern, bootstrap, args.rate, slices, fixed, stop, errors),
                                    daemon=True) for pattern in args.patterns]
        print(f"soak: {', '.join(args.patterns)} at {args.rate:g} events/s each for {slices * SLICE_S / 60:g} min, "
              f"{int(args.rate * SLICE_S) * slices} events each, {args.keys} keys (broker {bootstrap}, checkpoints in {home})",
              flush=True)
        print(f"{'min':>5} {'pattern':<17} {'state rows':>10} {'RocksDB SST KiB':>15} {'checkpoint KiB':>14} "
              f"{'lag':>7} {'JVM MiB':>7} {'Python MiB':>10} {'broker MiB':>10}", flush=True)
        started = time.monotonic()

        def rows() -> None:
            mib = memory(broker.pid)
            for pattern, query in queries.items():
                if query.exception():
                    raise SystemExit(f"soak: {pattern} failed: {runner.failure(query.exception())}")
                progress = json.loads(query.lastProgress.json) if hasattr(query.lastProgress, "json") \
                    else query.lastProgress
                state_rows, sst = _state(progress or {})
                behind = lag(read_to(progress), _ends(consumer, inputs[pattern]))
                print(f"{(time.monotonic() - started) / 60:5.1f} {pattern:<17} {state_rows:>10} {sst / 1024:>15.0f} "
                      f"{_size(home / pattern) / 1024:>14.0f} {behind:>7} {mib.jvm:>7.0f} {mib.python:>10.0f} "
                      f"{mib.broker:>10.0f}", flush=True)

        for sender in senders:
            sender.start()
        try:
            while _running(senders, args.every):
                rows()
        finally:
            stop.set()  # on the way out after a failure: generators end after their current slice
        if errors:
            raise SystemExit("soak: a generator failed: " + "; ".join(errors))
        print("soak: every generator has sent all its events; the jobs catch up", flush=True)
        rows()
        for query in queries.values():
            query.processAllAvailable()
        print("soak: caught up", flush=True)
        rows()
        ok = True
        for pattern, query in queries.items():
            query.stop()
            report = verify(pattern, bootstrap)
            ok &= report.ok
            print("\n".join(report.lines()), flush=True)
        lab_spark.stop(spark)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
