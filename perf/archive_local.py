"""`make bench`'s one long local session with the class archive (joinlab.class_archive) or
without it, the session's garbage collections logged, and a summary of them: the study behind
keeping the archive off local sessions (docs/benchmarks.md, "The class archive, back").

    .venv/bin/python -m perf.archive_local with /tmp/gc-with.log -- --yardstick-rounds 0 --latency-seconds 0
    .venv/bin/python -m perf.archive_local without /tmp/gc-without.log -- --yardstick-rounds 0 --latency-seconds 0

Each prints make bench's tables, then the collections by cause with their pauses. Run the two
alternated, more than once: one pair is within the machine's spread.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

PAUSE = re.compile(r"\] GC\(\d+\) (Pause \w+ \([^)]*\)) .* ([\d.]+)ms$")


def gc_summary(log: str) -> dict[str, tuple[int, float]]:
    """A JVM's `-Xlog:gc*` text -> {pause kind and cause: (how many, total ms)}."""
    count, ms = Counter(), Counter()
    for line in log.splitlines():
        if found := PAUSE.search(line):
            count[found.group(1)] += 1
            ms[found.group(1)] += float(found.group(2))
    return {kind: (count[kind], ms[kind]) for kind in sorted(count)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.archive_local", description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", choices=["with", "without"])
    parser.add_argument("gc_log", type=Path, help="where the session's JVM writes its GC log")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then perf.bench's arguments")
    args = parser.parse_args(argv)

    import joinlab.spark
    from joinlab import class_archive
    from perf.bench.run import main as bench
    lab_options = joinlab.spark.driver_java_options

    def driver_java_options(master: str) -> str:
        extra = [f"-Xlog:gc*:file={args.gc_log}"]
        if args.archive == "with":
            extra.append(class_archive.java_options())
        return " ".join([lab_options(master), *extra])

    joinlab.spark.driver_java_options = driver_java_options  # the study's switch, outside the lab
    status = bench([a for a in args.bench if a != "--"])
    print(f"\ngarbage collections of the session's JVM, {args.archive} the class archive ({args.gc_log}):")
    for kind, (n, ms) in gc_summary(args.gc_log.read_text()).items():
        print(f"  {kind:45} {n:6,} {ms:10,.0f} ms")
    return status


if __name__ == "__main__":
    sys.exit(main())
