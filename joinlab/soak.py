"""`make soak`: every pattern at a steady rate for a while, to see whether state and memory level off.

    python -m joinlab.soak --minutes 10 --rate 20 --every 30

One embedded broker, one Spark session with the four jobs running side by side (as `make up`
runs them), one generator thread per pattern sending at `--rate` events/s. Every `--every`
seconds a row per pattern: state rows, RocksDB SST size (the state store's own metric), the
checkpoint's size on disk, memory of this process with its JVM and Python workers, and the
output lag (records the job has not read yet). At the end the generators stop, the jobs catch up,
and each pattern's output is verified against its reference.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from joinlab import patterns
from joinlab.generate import Disorder, send

WITHIN_THE_DELAY = Disorder(delayed=0.3, max_delay_s=3.0, duplicates=0.05, malformed=0.01)
EXTRA = {"lottery": {"lotteries": 5, "users": 200}}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _memory_mib() -> float:
    """Resident memory of this process and all its children (the JVM, Python workers)."""
    import psutil
    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def _lag(progress: dict) -> int:
    """Records available to the job but not read yet, from its last progress."""
    lag = 0
    for source in progress.get("sources", []):
        done, latest = (json.loads(source.get(k) or "{}") if isinstance(source.get(k), str) else (source.get(k) or {})
                        for k in ("endOffset", "latestOffset"))
        for topic, parts in latest.items():
            if isinstance(parts, dict):
                lag += sum(max(int(o) - int(done.get(topic, {}).get(p, 0)), 0) for p, o in parts.items())
    return lag


def _state(progress: dict) -> tuple[int, int]:
    ops = progress.get("stateOperators") or []
    rows = sum(op.get("numRowsTotal", 0) for op in ops)
    sst = sum(int((op.get("customMetrics") or {}).get("rocksdbSstFileSize", 0)) for op in ops)
    return rows, sst


def _generate(pattern: str, bootstrap: str, rate: float, seconds: float, stop: threading.Event) -> None:
    """Send the pattern's events at `rate`/s for `seconds`, one generator slice per 10 s (each
    with its own seed, its event times after the previous slice's)."""
    generator = patterns.generator(pattern)
    started, piece = time.monotonic(), 0
    while not stop.is_set() and time.monotonic() - started < seconds:
        records = generator.generate(1000 + piece, max(int(rate * 10), 1), disorder=WITHIN_THE_DELAY,
                                     **EXTRA.get(pattern, {}))
        send(bootstrap, _shifted(records, piece), rate=rate, progress=False)
        piece += 1


def _shifted(records: list, piece: int) -> list:
    """Records of slice `piece`, with event times and ids moved past earlier slices' (so a slice
    is new data, not a replay of the first one): ids are strings or numbers in JSON bodies."""
    return records if piece == 0 else [_shift(r, piece) for r in records]


def _shift(record, piece: int):
    from datetime import timedelta
    from joinlab.events import parse_time
    try:
        body = json.loads(record.value)
    except ValueError:
        return record
    if not isinstance(body, dict):
        return record
    for name, value in list(body.items()):
        if name == "event_time" and isinstance(value, str) and parse_time(value):
            body[name] = (parse_time(value) + timedelta(days=piece)).isoformat().replace("+00:00", "Z")
        elif name.endswith("_id") and isinstance(value, str):
            body[name] = f"{value}-{piece}"
        elif name.endswith("_id") and isinstance(value, int) and not isinstance(value, bool):
            body[name] = value + piece * 10_000_000_000
    key = record.key
    return type(record)(record.topic, key + f"-{piece}".encode() if key else key, json.dumps(body).encode(),
                        record.kind)


def _first_batch(pattern: str, query, timeout_s: float = 600) -> None:
    from joinlab import job as runner
    deadline = time.monotonic() + timeout_s
    while not query.recentProgress:
        if query.exception() is not None:
            raise SystemExit(f"soak: {pattern} failed to start: {runner.failure(query.exception())}")
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: {pattern} made no progress in {timeout_s:.0f} s")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m joinlab.soak", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long the generators send (default 10)")
    p.add_argument("--rate", type=float, default=20.0, help="events per second per pattern (default 20)")
    p.add_argument("--every", type=float, default=30.0, help="seconds between report rows (default 30)")
    p.add_argument("--patterns", nargs="*", default=list(patterns.PATTERNS), choices=list(patterns.PATTERNS))
    args = p.parse_args(argv)

    from joinlab import job as runner
    from joinlab.broker import EmbeddedBroker
    from joinlab.spark import session
    from joinlab.topics import create_topics
    from joinlab.verify import verify

    home = Path(tempfile.mkdtemp(prefix="joinlab-soak-"))
    stop = threading.Event()
    with ExitStack() as stack:
        broker = stack.enter_context(EmbeddedBroker(log_path=home / "broker.log"))
        bootstrap = broker.bootstrap_servers
        # Python workers connect back to the JVM within this time; on a busy machine 15 s is too short
        spark = session("soak", **{"spark.python.authenticate.socketTimeout": "120s"})
        runner.quiet_failures(spark)
        queries, senders = {}, []
        for pattern in args.patterns:
            job = patterns.job(pattern)
            create_topics(bootstrap, job.INPUT_TOPICS + job.OUTPUT_TOPICS)
            stack.enter_context(runner.services(job, bootstrap))
            queries[pattern] = runner.start(spark, job, bootstrap, str(home / pattern), name=pattern.replace("-", "_"),
                                            trigger_interval="2 seconds")
            _first_batch(pattern, queries[pattern])  # one at a time: four starting at once strain 2 cores
            sender = threading.Thread(target=_generate, args=(pattern, bootstrap, args.rate, args.minutes * 60, stop),
                                      daemon=True)
            sender.start()
            senders.append(sender)
        print(f"soak: {', '.join(args.patterns)} at {args.rate:g} events/s each for {args.minutes:g} min "
              f"(broker {bootstrap}, checkpoints in {home})", flush=True)
        print(f"{'min':>5} {'pattern':<17} {'state rows':>10} {'RocksDB SST KiB':>15} {'checkpoint KiB':>14} "
              f"{'lag':>7} {'memory MiB':>10}", flush=True)
        started = time.monotonic()
        try:
            while any(s.is_alive() for s in senders):
                time.sleep(args.every)
                memory = _memory_mib()
                for pattern, query in queries.items():
                    if query.exception():
                        raise SystemExit(f"soak: {pattern} failed: {runner.failure(query.exception())}")
                    progress = json.loads(query.lastProgress.json) if hasattr(query.lastProgress, "json") \
                        else (query.lastProgress or {})
                    rows, sst = _state(progress)
                    print(f"{(time.monotonic() - started) / 60:5.1f} {pattern:<17} {rows:>10} {sst / 1024:>15.0f} "
                          f"{_size(home / pattern) / 1024:>14.0f} {_lag(progress):>7} {memory:>10.0f}", flush=True)
        finally:
            stop.set()
            for sender in senders:
                sender.join(timeout=60)  # a slice in flight finishes before the broker goes
        print("soak: generators done; waiting for the jobs to catch up", flush=True)
        for query in queries.values():
            query.processAllAvailable()
        ok = True
        for pattern, query in queries.items():
            query.stop()
            report = verify(pattern, bootstrap)
            ok &= report.ok
            print("\n".join(report.lines()), flush=True)
        spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
