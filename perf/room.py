"""The room's cost and fairness, measured on a room of our own (`joinlab lab up --room` on free ports):

  capacity   the room's memory (PSS, every process once: perf.memory) and CPU with 0, 1, 2 and 4
             participants, each a JupyterLab server with one kernel running the tweet-views
             notebook's workload (its generator at the notebook's rate, its job on the lab's server);
  alone      one participant runs notebooks/tweet_views.ipynb top to bottom, then three at once;
  first      a participant's first status line after the notebook's job cell, in a warm room;
  fairness   two participants at the notebook's rate, their batch durations alone, then beside a
             third whose generator sends 100 times faster (with the room's per-trigger cap, and
             with that participant lifting it).

    .venv/bin/python -m perf.room                      # all of it, about 20 minutes on 2 cores
    .venv/bin/python -m perf.room --only capacity      # one part

As root (the room makes Unix users). Figures go to docs/benchmarks.md#the-room by hand.
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import psutil

from perf import memory
from tests.room import Participant, open_room
from tests.test_room import SIZE, run_notebook

NAMES = ("p1", "p2", "p3", "p4", "heavy")
RATE = 100  # the notebook's default rate (LAB_NOTEBOOK_RATE)
WORKLOAD = """
import os
os.environ.setdefault("LAB_ROOM_MAX_OFFSETS_PER_TRIGGER", "{cap}")
from joinlab.notebook import Lab
lab = Lab("tweet-views")
lab.create_topics()
feed = lab.start_generator(count=int({rate} * 300), rate={rate})
import time as _t
_began = _t.monotonic()
query = lab.start_job(trigger="2 seconds", max_offsets_per_trigger=500)
lab.wait_until(lambda: query.lastProgress is not None, 120, "the first micro-batch")
print("first", round(_t.monotonic() - _began, 2))
"""


def room_pids(room) -> set[int]:
    return {pid for _, pid, _, _, _ in memory.processes(room.home)}


def cpu_seconds(pids: set[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
    return total


def measure(room, window_s: float = 30.0) -> dict:
    """The room's PSS (largest of a few samples) and the cores its processes used over `window_s`."""
    pids = room_pids(room)
    before, began = cpu_seconds(pids), time.monotonic()
    largest = 0
    while time.monotonic() - began < window_s:
        largest = max(largest, memory.total(memory.sample(room.home))[1])
        time.sleep(5)
    used = cpu_seconds(pids & room_pids(room)) - before
    return {"pss_mib": largest / 2**20, "cores": used / (time.monotonic() - began)}


def batches_of(kernel) -> list[float]:
    """The durations (s) of every micro-batch the kernel's query ran that read input (`lab.progress()`)."""
    out = kernel.run("_p = lab.progress(); print(_p[_p['records in'] > 0]['seconds'].tolist() if len(_p) else [])")
    return json.loads(out.strip().splitlines()[-1])


def start(p: Participant, rate: float, cap: int = 2000):
    kernel = p.kernel()
    kernel.run(SIZE)
    printed = kernel.run(WORKLOAD.format(rate=rate, cap=cap))
    return kernel, float(printed.split("first", 1)[1].split()[0])


def capacity(room, log) -> list[dict]:
    rows = [{"participants": 0, **measure(room)}]
    log(f"  0 participants: {rows[-1]}")
    kernels = []
    for n, name in enumerate(NAMES[:4], start=1):
        kernels.append(start(Participant.joined(room, name), RATE))
        if n in (1, 2, 4):
            time.sleep(20)  # past the first micro-batches: what the room holds while they run
            rows.append({"participants": n, "first_s": kernels[-1][1], **measure(room)})
            log(f"  {n} participants: {rows[-1]}")
    for kernel, _ in kernels:
        kernel.run("lab.stop()")
        kernel.close()
    return rows


def alone_then_three(room, log) -> dict:
    people = [Participant.joined(room, name) for name in NAMES[:3]]
    results: dict = {}
    run_notebook(people[0], "notebooks/tweet_views.ipynb", results)
    alone = results.pop(people[0].name)[1]
    threads = [threading.Thread(target=run_notebook, args=(p, "notebooks/tweet_views.ipynb", results)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = {name: r[1] for name, r in results.items()}
    log(f"  alone {alone:.0f} s; three at once {together}")
    return {"alone_s": alone, "together_s": together}


def fairness(room, log, window_s: float = 60.0) -> dict:
    """Median batch duration of two participants at RATE, alone, then beside one at 100 x RATE."""
    quiet = [start(Participant.joined(room, name), RATE)[0] for name in NAMES[:2]]
    time.sleep(window_s)
    found = {"alone": [statistics.median(batches_of(k)) for k in quiet]}
    for label, cap in (("beside 100x, capped", 2000), ("beside 100x, cap lifted", 10_000_000)):
        marks = [len(batches_of(k)) for k in quiet]
        heavy, _ = start(Participant.joined(room, "heavy"), RATE * 100, cap)
        began = time.monotonic()
        sent = int(heavy.run("print(feed.sent)").split()[-1])
        time.sleep(window_s)
        found[label] = [statistics.median(batches_of(k)[m:] or [0]) for k, m in zip(quiet, marks)]
        found[label + ": heavy's events/s"] = (int(heavy.run("print(feed.sent)").split()[-1]) - sent) / (
            time.monotonic() - began)
        heavy.run("lab.stop()")
        heavy.close()
        log(f"  {label}: {found[label]} s (alone {found['alone']} s)")
    for k in quiet:
        k.run("lab.stop()")
        k.close()
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m perf.room", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["capacity", "alone", "fairness"], action="append")
    args = parser.parse_args(argv)
    parts = args.only or ["capacity", "alone", "fairness"]
    found = {}
    with open_room(NAMES) as room:
        for part in parts:
            print(f"{part}:", flush=True)
            found[part] = {"capacity": capacity, "alone": alone_then_three, "fairness": fairness}[part](
                room, lambda line: print(line, flush=True))
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
