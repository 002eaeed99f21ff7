"""Where a running lab's first jobs spend a tiny batch: tweet views run again and again, each run a
new client process of the lab's server, as participants start theirs one after another. Per run:
the median of each part of Spark's progress (`durationMs`: planning, offsets, the batch itself,
commits) over the batches after the first.

    python -m perf.first_jobs --runs 6        # against the native lab of $LAB_HOME (`make up`)

The events (1,200, 100 a trigger) are sent once, to the lab's broker; each run reads them from the
start with a fresh checkpoint, as `joinlab run tweet-views --available-now --reset
--max-offsets-per-trigger 100` does.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PATTERN = "tweet-views"
PARTS = ("triggerExecution", "queryPlanning", "latestOffset", "addBatch", "walCommit", "commitOffsets")

_ONE_RUN = """
import json, sys
from joinlab import patterns, runner
from joinlab.spark import session
from joinlab.status import as_dict
spark = session("first-jobs")
query = runner.start(spark, patterns.job(sys.argv[1]), sys.argv[2], sys.argv[3], available_now=True,
                     max_offsets_per_trigger=100, counted=True)
query.awaitTermination()
print(json.dumps([as_dict(p).get("durationMs") for p in query.recentProgress]))
"""


def one_run(bootstrap: str, checkpoint: Path) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", _ONE_RUN, PATTERN, bootstrap, str(checkpoint)],
                          capture_output=True, text=True, check=True)
    batches = json.loads(done.stdout.strip().splitlines()[-1])[1:]
    return {part: round(statistics.median(b.get(part, 0) for b in batches)) for part in PARTS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args(argv)
    from joinlab import patterns
    from joinlab.broker import bootstrap_servers
    from joinlab.generate import send
    from joinlab.topics import create_topics
    bootstrap = bootstrap_servers()
    create_topics(bootstrap, patterns.all_topics(PATTERN))
    send(bootstrap, patterns.generator(PATTERN).generate(7, 1200), progress=False)
    print("run | " + " | ".join(PARTS) + "  (medians over the batches after the first, ms)", flush=True)
    with tempfile.TemporaryDirectory(prefix="first-jobs-") as tmp:
        for number in range(1, args.runs + 1):
            parts = one_run(bootstrap, Path(tmp, f"checkpoint-{number}"))
            print(f"{number} | " + " | ".join(str(parts[p]) for p in PARTS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
