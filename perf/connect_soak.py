"""A workshop day on one Spark Connect server: many clients, each starting a query and stopping it,
and the server's memory as they come and go.

    python -m perf.connect_soak --starts 300                  # a server started here (local[2])
    python -m perf.connect_soak --starts 300 --in-lab .lab    # the native lab's server (`make up`)

Each start is what a participant's `joinlab run` or notebook does to the server: a new client
session, a pattern's query (the patterns in turn, through `joinlab.microbatch` on a few generated
records: transformWithState stages, Python workers, state stores, a memory sink), stopped, the
session ended. Every `--every` starts the server's JVM is measured (RSS and PSS, its Python workers
apart) and the seconds a start took; the table ends with the growth from the first sample.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psutil


def server_jvm(pid: int) -> psutil.Process:
    """The java process of the server whose process (or launcher) is `pid`."""
    root = psutil.Process(pid)
    return next(p for p in [root, *root.children(recursive=True)] if p.name() == "java")


def sizes(jvm: psutil.Process) -> tuple[int, int, int]:
    """(RSS, PSS of the JVM, PSS of its Python workers) in MiB."""
    workers = [p for p in jvm.children(recursive=True) if "python" in p.name()]
    pss = sum(p.memory_full_info().pss for p in workers if p.is_running())
    return jvm.memory_info().rss >> 20, jvm.memory_full_info().pss >> 20, pss >> 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.connect_soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--every", type=int, default=25, help="measure after this many starts")
    parser.add_argument("--in-lab", type=Path, metavar="LAB_HOME", help="the native lab's server running there")
    args = parser.parse_args(argv)
    if args.in_lab:
        os.environ["LAB_HOME"] = str(args.in_lab.resolve())
    os.environ.setdefault("SPARK_MASTER", "local[2]")
    from joinlab import microbatch, patterns
    from joinlab import spark as lab_spark
    from joinlab.stack import procs, services
    if args.in_lab:
        found = services.running_connect_server()
        if found is None:
            raise SystemExit(f"no native lab's Spark Connect server runs with LAB_HOME={args.in_lab}")
        url, token = found
        jvm = server_jvm(procs.load(services.CONNECT).pid)
    else:
        url, token = lab_spark.embedded("connect-soak")
        jvm = server_jvm(os.getpid())
    names = [name for name in patterns.PATTERNS if patterns.job(name).LOOKUP is None]
    records = {name: patterns.generator(name).generate(1, 40) for name in names}
    rows, took = [], []
    print(f"server {url}, JVM pid {jvm.pid}; {args.starts} starts over {', '.join(names)}", file=sys.stderr)
    for start in range(1, args.starts + 1):
        name = names[start % len(names)]
        began = time.monotonic()
        client = lab_spark.connect(url, token)
        microbatch.run(client, patterns.job(name).build, [records[name][:20], records[name][20:]])
        client.stop()
        took.append(time.monotonic() - began)
        if start == 1 or start % args.every == 0:
            rss, pss, workers = sizes(jvm)
            rows.append((start, rss, pss, workers, statistics.median(took[-args.every:])))
            print(f"  {start:>5} starts: server RSS {rss} MiB, PSS {pss} MiB, Python workers {workers} MiB, "
                  f"a start {rows[-1][4]:.1f} s", file=sys.stderr, flush=True)
    print(f"{'starts':>7} {'RSS MiB':>8} {'PSS MiB':>8} {'workers MiB':>12} {'median s':>9}")
    for start, rss, pss, workers, median in rows:
        print(f"{start:>7} {rss:>8} {pss:>8} {workers:>12} {median:>9.1f}")
    first, last = rows[min(1, len(rows) - 1)], rows[-1]
    print(f"growth from {first[0]} to {last[0]} starts: RSS {last[1] - first[1]:+} MiB, PSS {last[2] - first[2]:+} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
