"""Counting a transformWithState processor's state round trips, through pyspark's TwsTester.

Every state or timer call of a processor is a synchronous request to the JVM, and so are two
calls the framework makes for us: it sets the grouping key before each handleInputRows and each
handleExpiredTimer, and deletes each timer after it fired. `count(tester)` re-initialises the
tester's processor with a handle that counts its calls (the tester's state stays: its handle
hands out the same state variables again) and counts the framework's two per handler call.

The tests/test_*_unit.py "State round trips" tests use it per key and batch; run as a module it
prints each pattern's calls and the bytes its writes send per input event and stage, over seeded
generated events:

    .venv/bin/python -m tests.state_calls --events 20000 --batch 2000
"""
from __future__ import annotations

import argparse
import datetime
import pickle
import sys
from collections import Counter

from joinlab import patterns

STATE_METHODS = {"exists", "get", "update", "clear", "getValue", "containsKey", "updateValue", "iterator",
                 "keys", "values", "removeKey", "put", "appendValue", "appendList"}
WRITE_METHODS = {"update", "updateValue", "put", "appendValue", "appendList"}
TIMER_METHODS = {"registerTimer", "deleteTimer", "listTimers"}
FRAMEWORK = "(framework) "


def _internal(value):
    """A value as pyspark pickles it for the JVM (schema.toInternal: structs as tuples, times as
    microseconds since the epoch), so its pickle's length is the bytes a write sends."""
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return int(moment.timestamp() * 1_000_000)
    if isinstance(value, list):
        return [_internal(v) for v in value]
    if isinstance(value, tuple):  # NamedTuples and Rows too: pickled as plain tuples
        return tuple(_internal(v) for v in value)
    return value


def sent_bytes(value) -> int:
    return len(pickle.dumps(_internal(value), protocol=pickle.HIGHEST_PROTOCOL))


class _Counted:
    """A state variable whose calls are counted under `name.method`."""

    def __init__(self, inner, name: str, counts: Counter, written: Counter):
        self._inner, self._name, self._counts, self._written = inner, name, counts, written

    def __getattr__(self, attr):
        value = getattr(self._inner, attr)
        if attr not in STATE_METHODS:
            return value

        def call(*args, **kwargs):
            self._counts[f"{self._name}.{attr}"] += 1
            if attr in WRITE_METHODS:
                self._written[self._name] += sum(map(sent_bytes, args))
            return value(*args, **kwargs)
        return call


class _CountingHandle:
    def __init__(self, inner, counts: Counter, written: Counter):
        self._inner, self._counts, self._written = inner, counts, written

    def __getattr__(self, attr):
        value = getattr(self._inner, attr)
        if attr in ("getValueState", "getMapState", "getListState"):
            return lambda name, *args, **kwargs: _Counted(value(name, *args, **kwargs), name, self._counts,
                                                          self._written)
        if attr in TIMER_METHODS:
            def call(*args, **kwargs):
                self._counts[attr] += 1
                return value(*args, **kwargs)
            return call
        return value


def count(tester, counts: Counter | None = None, written: Counter | None = None) -> Counter:
    """Count the state and timer calls of `tester`'s processor from now on, with the framework's:
    setImplicitKey per handleInputRows / handleExpiredTimer call, deleteTimer per fired timer; and
    in `written`, the bytes its writes send per state variable (keys and values, as pickled)."""
    counts = Counter() if counts is None else counts
    written = Counter() if written is None else written
    processor = tester.processor
    rows, timer = processor.handleInputRows, processor.handleExpiredTimer

    def handle_rows(key, input_rows, timer_values):
        counts[FRAMEWORK + "setImplicitKey"] += 1
        return rows(key, input_rows, timer_values)

    def handle_timer(key, timer_values, info):
        counts[FRAMEWORK + "setImplicitKey"] += 1
        counts[FRAMEWORK + "deleteTimer"] += 1
        return timer(key, timer_values, info)

    processor.init(_CountingHandle(tester.handle, counts, written))
    processor.handleInputRows, processor.handleExpiredTimer = handle_rows, handle_timer
    return counts


def total(counts: Counter, framework: bool = True) -> int:
    return sum(v for k, v in counts.items() if framework or not k.startswith(FRAMEWORK))


# --- Calls per event of each pattern's stages, over generated events -------------------------------

def _stages(pipeline, names: list[str]) -> dict[str, tuple[Counter, Counter]]:
    """Each stage's (calls, bytes written), counted from now on."""
    stages = {name: (Counter(), Counter()) for name in names}
    for name, (calls, written) in stages.items():
        count(getattr(pipeline, name), calls, written)
    return stages


def stage_calls(pattern: str, events: int, batch: int, seed: int):
    """(input events, each stage's (calls, bytes written)) over `events` seeded events of `pattern`
    through its in-memory chain, in micro-batches of `batch`."""
    job = patterns.job(pattern)
    pipeline = job.InMemory()
    counters = _stages(pipeline, [stage.name for stage in job.STAGES])
    rows = pipeline.rows(patterns.generator(pattern).generate(seed, events))
    pipeline.run([rows[i:i + batch] for i in range(0, len(rows), batch)])
    return len(rows), counters


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="State round trips per input event of each stage.")
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=2000, help="events per micro-batch (default 2000)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--pattern", choices=list(patterns.PATTERNS), action="append")
    parser.add_argument("--detail", action="store_true", help="per call name too")
    args = parser.parse_args(argv)
    for pattern in args.pattern or list(patterns.PATTERNS):
        n, counters = stage_calls(pattern, args.events, args.batch, args.seed)
        calls = sum(total(c) for c, _ in counters.values())
        print(f"{pattern}: {n} input events, batches of {args.batch}: {calls / n:.2f} round trips per event")
        for stage, (counts, written) in counters.items():
            print(f"  {stage:10} {total(counts) / n:6.2f} per event ({total(counts, False) / n:.2f} by the processor), "
                  f"{sum(written.values()) / n:,.0f} bytes written per event")
            if args.detail:
                for name, value in counts.most_common():
                    print(f"      {name:34} {value / n:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
