"""A workshop day on one Spark Connect server: many clients, each starting a query and stopping it,
and the server's memory as they come and go.

    python -m perf.connect_soak --starts 300                  # a server started here (local[2])
    python -m perf.connect_soak --starts 300 --in-lab .lab    # the native lab's server (`make up`)

Each start is what a participant's `joinlab run` or notebook does to the server: a new client
session, a pattern's query (the patterns in turn, through `joinlab.microbatch` on a few generated
records: transformWithState stages, Python workers, state stores, a memory sink), stopped, the
session ended. Every `--every` starts the server's JVM is measured (RSS and PSS, its Python workers
apart) and the seconds a start took; the table ends with the growth from the first sample.

Where the growth goes: at each sample the JVM first collects in full (`jcmd GC.run`), so its heap
figure is what starts leave alive, not garbage not yet collected; then its metaspace, and, for a
server started here (which runs with -XX:NativeMemoryTracking=summary), what the JVM itself has
committed by category. RSS less that total is memory the JVM does not track: RocksDB's, glibc's.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
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


_GENERATION = re.compile(r"^\s*(?:garbage-first heap|def new generation|tenured generation|PSYoungGen|ParOldGen)"
                         r"\s+total \d+K, used (\d+)K", re.M)
_METASPACE = re.compile(r"Metaspace\s+used (\d+)K, committed (\d+)K")
_NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(\d+)KB", re.M)
_NMT_CATEGORY = re.compile(r"^-\s+(.+?) \(reserved=\d+KB, committed=(\d+)KB", re.M)


def jcmd(pid: int, *command: str) -> str:
    return subprocess.run(["jcmd", str(pid), *command], capture_output=True, text=True, timeout=120).stdout


def live(jvm: psutil.Process) -> dict[str, int]:
    """After a full collection: the heap's live objects, the metaspace used, and (with NMT on) the
    JVM's committed total and by category, in MiB."""
    jcmd(jvm.pid, "GC.run")
    heap = jcmd(jvm.pid, "GC.heap_info")
    found = {"heap live": sum(int(used) for used in _GENERATION.findall(heap)) >> 10}
    if (meta := _METASPACE.search(heap)) is not None:
        found["metaspace"] = int(meta.group(1)) >> 10
    nmt = jcmd(jvm.pid, "VM.native_memory", "summary")
    if (total := _NMT_TOTAL.search(nmt)) is not None:
        found["JVM committed"] = int(total.group(1)) >> 10
        found |= {f"nmt {name}": int(kb) >> 10 for name, kb in _NMT_CATEGORY.findall(nmt)}
    return found


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
        found = procs.running_connect_server()
        if found is None:
            raise SystemExit(f"no native lab's Spark Connect server runs with LAB_HOME={args.in_lab}")
        url, token = found
        jvm = server_jvm(procs.load(services.CONNECT).pid)
    else:
        os.environ["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, [os.environ.get("SPARK_SUBMIT_OPTS"),
                                                                "-XX:NativeMemoryTracking=summary"]))
        url, token = lab_spark.embedded("connect-soak")
        jvm = server_jvm(os.getpid())
    names = microbatch.on_records_alone()
    records = {name: patterns.generator(name).generate(1, 40) for name in names}
    rows, took, inside = [], [], []
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
            inside.append(live(jvm))
            print(f"  {start:>5} starts: server RSS {rss} MiB, PSS {pss} MiB, Python workers {workers} MiB, "
                  f"a start {rows[-1][4]:.1f} s; after a full GC {inside[-1]}", file=sys.stderr, flush=True)
    print(f"{'starts':>7} {'RSS MiB':>8} {'PSS MiB':>8} {'workers MiB':>12} {'median s':>9}")
    for start, rss, pss, workers, median in rows:
        print(f"{start:>7} {rss:>8} {pss:>8} {workers:>12} {median:>9.1f}")
    first, last = rows[min(1, len(rows) - 1)], rows[-1]
    print(f"growth from {first[0]} to {last[0]} starts: RSS {last[1] - first[1]:+} MiB, PSS {last[2] - first[2]:+} MiB")
    begin, end = inside[min(1, len(inside) - 1)], inside[-1]
    print("inside the JVM (MiB, after a full GC), from {} to {} starts:".format(first[0], last[0]))
    for name in end:
        print(f"  {name:<28} {begin.get(name, 0):>6} -> {end[name]:>6}  ({end[name] - begin.get(name, 0):+})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
