"""State round trips per event of each stateful stage, counted through TwsTester.

Every state or timer call of a transformWithState processor is a synchronous request to the JVM,
and so are two calls the framework makes for us: it sets the grouping key before each
handleInputRows and each handleExpiredTimer, and deletes each timer after it fired. This runs each
pattern's in-memory pipeline (joinlab.in_memory, what the unit tests drive) over seeded generated
events in micro-batches of `--batch` events, with every processor's handle wrapped in a counter,
and prints the calls per input event of the pattern, per stage and per call name.

    .venv/bin/python -m perf.state_calls --events 20000 --batch 2000
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter

STATE_METHODS = {"exists", "get", "update", "clear", "getValue", "containsKey", "updateValue", "iterator",
                 "keys", "values", "removeKey", "put", "appendValue", "appendList"}
TIMER_METHODS = {"registerTimer", "deleteTimer", "listTimers"}


class _Counted:
    """A state variable whose calls are counted under `name.method`."""

    def __init__(self, inner, name: str, counts: Counter):
        self._inner, self._name, self._counts = inner, name, counts

    def __getattr__(self, attr):
        value = getattr(self._inner, attr)
        if attr in STATE_METHODS:
            def call(*args, **kwargs):
                self._counts[f"{self._name}.{attr}"] += 1
                return value(*args, **kwargs)
            return call
        return value


class _CountingHandle:
    def __init__(self, inner, counts: Counter):
        self._inner, self._counts = inner, counts

    def __getattr__(self, attr):
        value = getattr(self._inner, attr)
        if attr in ("getValueState", "getMapState", "getListState"):
            return lambda name, *args, **kwargs: _Counted(value(name, *args, **kwargs), name, self._counts)
        if attr in TIMER_METHODS:
            def call(*args, **kwargs):
                self._counts[attr] += 1
                return value(*args, **kwargs)
            return call
        return value


def counted(processor, counts: Counter):
    """`processor` with its handle counted, and the framework's per-call round trips added:
    setImplicitKey per handleInputRows / handleExpiredTimer call, deleteTimer per fired timer."""
    init, rows, timer = processor.init, processor.handleInputRows, processor.handleExpiredTimer

    def handle_rows(key, input_rows, timer_values):
        counts["(framework) setImplicitKey"] += 1
        return rows(key, input_rows, timer_values)

    def handle_timer(key, timer_values, info):
        counts["(framework) setImplicitKey"] += 1
        counts["(framework) deleteTimer"] += 1
        return timer(key, timer_values, info)

    processor.init = lambda handle: init(_CountingHandle(handle, counts))
    processor.handleInputRows, processor.handleExpiredTimer = handle_rows, handle_timer
    return processor


def count_calls(pattern: str, events: int, batch: int, seed: int) -> tuple[int, dict[str, Counter]]:
    """Run `pattern`'s in-memory pipeline (joinlab.in_memory, as the unit tests do) over `events`
    seeded events in micro-batches of `batch`; (its input rows, calls counted per processor class)."""
    from joinlab import in_memory, patterns
    counters: dict[str, Counter] = {}
    real = in_memory.TwsTester

    def tester(processor, *args, **kwargs):
        return real(counted(processor, counters.setdefault(type(processor).__name__, Counter())), *args, **kwargs)

    in_memory.TwsTester = tester  # every stage the pipeline builds gets a counted processor
    try:
        pipeline = getattr(in_memory, PIPELINES[pattern])()
        rows = pipeline.rows(patterns.generator(pattern).generate(seed, events))
        pipeline.run([rows[i:i + batch] for i in range(0, len(rows), batch)])
    finally:
        in_memory.TwsTester = real
    return len(rows), counters


PIPELINES = {"tweet-views": "TweetViews", "car-pollution": "CarPollution", "lottery": "Lottery",
             "money-enrichment": "MoneyEnrichment"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.state_calls", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=2000, help="events per micro-batch (default 2000)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--pattern", choices=list(PIPELINES), action="append", help="repeat; default: all")
    parser.add_argument("--detail", action="store_true", help="per call name too")
    args = parser.parse_args(argv)
    random.seed(args.seed)
    for pattern in args.pattern or list(PIPELINES):
        n, counters = count_calls(pattern, args.events, args.batch, args.seed)
        total = sum(sum(c.values()) for c in counters.values())
        print(f"{pattern}: {n} input events, batches of {args.batch}: {total / n:.2f} round trips per event")
        for stage, counts in counters.items():
            ours = sum(v for k, v in counts.items() if not k.startswith("(framework)"))
            print(f"  {stage:18} {sum(counts.values()) / n:6.2f} per event ({ours / n:.2f} by the processor)")
            if args.detail:
                for name, value in counts.most_common():
                    print(f"      {name:34} {value / n:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
