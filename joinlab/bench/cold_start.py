"""Step 7: the cold start, a fresh JVM per run, with the class archive and without.

What `joinlab run`, `make demo` and a notebook's first query meet, and the other steps never see
(their session is warm). Each run is a new Python process that starts a session, runs tweet views
on the same few events (availableNow, a checkpoint of its own) and exits; the two variants
alternate, so that a machine getting busier weighs on both.

    python -m joinlab.bench.cold_start BOOTSTRAP CHECKPOINT   # one run; prints its timings as JSON
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from joinlab.bench.step import BenchError, log

EVENTS = 300
VARIANTS = {"class archive on": "on", "class archive off": "off"}


def one_run(bootstrap: str, checkpoint: str) -> dict:
    """In a fresh process: seconds to the session, to start(), and from there to the last batch."""
    started = time.monotonic()
    from joinlab import job as runner, patterns
    from joinlab.spark import session
    spark = session("cold-start")
    ready = time.monotonic()
    query = runner.start(spark, patterns.job("tweet-views"), bootstrap, checkpoint, available_now=True)
    running = time.monotonic()
    query.awaitTermination()
    if not query.recentProgress or query.exception() is not None:
        raise SystemExit(f"the query ended without a batch: {query.exception()}")
    return {"session_s": ready - started, "start_s": running - ready, "batches_s": time.monotonic() - running}


def measure(bootstrap: str, seed: int, work: Path, runs: int, deadline_s: float) -> dict[str, list[dict]]:
    """`runs` fresh processes per variant on EVENTS tweet-views events; their timings, by variant."""
    from joinlab import class_archive, patterns
    from joinlab.generate import send
    from joinlab.topics import create_topics
    if not class_archive.path().is_file():
        raise BenchError(f"no class archive at {class_archive.path()}: run `make install` first")
    create_topics(bootstrap, patterns.all_topics("tweet-views"))
    send(bootstrap, patterns.generator("tweet-views").generate(seed, EVENTS), progress=False)
    out: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for i in range(runs):
        for name in (list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))):
            log(f"step 7 cold start: {name}, run {i + 1} of {runs}")
            env = {**os.environ, "LAB_CLASS_ARCHIVE": VARIANTS[name], "LAB_SPARK_UI": "false"}
            started = time.monotonic()
            try:
                done = subprocess.run([sys.executable, "-m", "joinlab.bench.cold_start", bootstrap,
                                       str(work / f"{VARIANTS[name]}-{i}")], env=env, capture_output=True,
                                      text=True, timeout=deadline_s)
            except subprocess.TimeoutExpired:
                raise BenchError(f"a cold start ({name}) did not finish within {deadline_s:.0f} s") from None
            if done.returncode != 0:
                raise BenchError(f"a cold start ({name}) failed:\n{done.stderr[-2000:]}")
            timings = json.loads(done.stdout.strip().splitlines()[-1])
            out[name].append({**timings, "process_s": time.monotonic() - started})
    return out


def format_cold_start(out: dict[str, list[dict]]) -> str:
    runs = min(len(v) for v in out.values())
    columns = [("session_s", "session s"), ("start_s", "start() s"), ("batches_s", "batches s"),
               ("process_s", "process s")]
    lines = [f"Cold start (a fresh JVM per run, tweet views on {EVENTS} events, availableNow; median of "
             f"{runs} runs each, the variants alternated)",
             f"  {'variant':<20} " + " ".join(f"{label:>10}" for _, label in columns)]
    medians = {name: {key: statistics.median(r[key] for r in rows) for key, _ in columns}
               for name, rows in out.items()}
    for name, m in medians.items():
        lines.append(f"  {name:<20} " + " ".join(f"{m[key]:>10.1f}" for key, _ in columns))
    on, off = medians["class archive on"], medians["class archive off"]
    lines.append(f"  {'off / on':<20} " + " ".join(f"{off[key] / on[key]:>9.2f}x" for key, _ in columns))
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(one_run(sys.argv[1], sys.argv[2])))
