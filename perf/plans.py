"""Each pattern's query plan as Spark analyses it, written one file per pattern with expression
ids, object addresses and random ids taken out, so that two checkouts' plans can be diffed: a
change that leaves every plan as it was cannot change what the jobs do per micro-batch, nor
their speed.

    .venv/bin/python -m perf.plans /tmp/plans/after           # in this checkout
    ../before/.venv/bin/python -m perf.plans /tmp/plans/before   # in another
    diff -r /tmp/plans/before /tmp/plans/after
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
from pathlib import Path

from joinlab import patterns
from joinlab.kit.kafka import Kafka, read
from joinlab.spark import session

NORMALISE = [(r"#\d+L?", "#"), (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID"),
             (r"0x[0-9a-f]+|@[0-9a-f]{6,}", "@"), (r"/\S+/(\.venv|site-packages)/", "/VENV/")]


def analysed(df) -> str:
    """The analysed logical plan of `df`, as `explain(extended=True)` prints it (a Spark Connect
    client asks the server), without the schema line above it."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        df.explain(extended=True)
    section = printed.getvalue().split("== Analyzed Logical Plan ==\n", 1)[1].split("\n== Optimized Logical Plan ==", 1)[0]
    return section.split("\n", 1)[1].rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write each pattern's analysed query plan, normalised.")
    parser.add_argument("out", type=Path, help="a folder: one <pattern>.plan per pattern")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    spark = session("plans")
    for pattern in patterns.PATTERNS:
        job = patterns.job(pattern)
        raw = read(spark, Kafka("127.0.0.1:9"), job.INPUT_TOPICS)  # never read: not started
        plan = analysed(job.build(raw))
        for found, instead in NORMALISE:
            plan = re.sub(found, instead, plan)
        (args.out / f"{pattern}.plan").write_text(plan)
        print(f"{pattern}: {len(plan.splitlines())} lines in {args.out / (pattern + '.plan')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
