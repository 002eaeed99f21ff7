"""One record's trip per pattern, as each spec page shows it ("One record's trip"): a few input
records, batch by batch; after each batch, what each stage keeps per key (the in-memory chain,
TwsTester); at the end, the records the real query writes for them (Spark, joinlab.microbatch).
tests/test_traces.py checks each page against it; print a pattern's trace to paste on its page:

    .venv/bin/python -m tests.traces lottery
"""
from __future__ import annotations

import datetime
import json
import sys

from joinlab import microbatch, patterns
from joinlab.generate import Record
from joinlab.kit.in_memory import Tester

TRIPS = {  # pattern -> batches of (topic, key, value): the record traced, and what it meets
    "ad-clicks": [
        [("impressions", "41", {"impression_id": 41, "ad_id": 7, "placement": "top", "event_time": "2026-03-01T09:00:00Z"})],
        [("clicks", "41", {"click_id": 900, "impression_id": 41, "event_time": "2026-03-01T09:00:20Z"})]],
    "tweet-views": [
        [("users", "3", {"user_id": 3, "name": "Ann", "handle": "@ann", "version": 1, "event_time": "2026-03-01T09:00:00Z"})],
        [("tweets", "7", {"tweet_id": 7, "user_id": 3, "text": "hello", "version": 1, "event_time": "2026-03-01T09:00:05Z"})]],
    "car-pollution": [
        [("zone-readings", "2", {"zone_id": 2, "pollution_level": 40.5, "seq": 1, "event_time": "2026-03-01T09:00:00Z"})],
        [("car-arrivals", "12", {"car_id": 12, "plate": "B-123", "to_zone_id": 2, "fuel_level": 0.8, "seq": 1,
                                 "event_time": "2026-03-01T09:00:05Z"})]],
    "lottery": [
        [("lottery-events", "5", {"event_id": "s5", "type": "LotteryStarted", "lottery_id": 5, "event_time": "2026-03-01T10:00:00Z"}),
         ("user-events", "3", {"event_id": "b1", "type": "CouponsBought", "user_id": 3, "amount": 2, "event_time": "2026-03-01T10:00:01Z"}),
         ("user-events", "3", {"event_id": "c1", "type": "Clicked", "user_id": 3, "lottery_id": 5, "event_time": "2026-03-01T10:00:02Z"})],
        [("lottery-events", "6", {"event_id": "s6", "type": "LotteryStarted", "lottery_id": 6, "event_time": "2026-03-01T10:00:30Z"})]],
    "money-enrichment": [
        [("money-users", "3", {"user_id": 3, "name": "Ann", "country": "PL", "segment": "gold", "version": 1,
                               "event_time": "2026-03-01T11:59:00Z"}),
         ("money-sessions", "s-1", {"session_id": "s-1", "user_id": 3, "country": "DE", "device": "phone",
                                    "event_time": "2026-03-01T12:00:00Z"})],
        [("money-transactions", "t-1", {"tx_id": "t-1", "user_id": 3, "session_id": "s-1", "amount": 25.0, "currency": "EUR",
                                        "type": "payment", "event_time": "2026-03-01T12:00:05Z"})],
        [("money-users", "4", {"user_id": 4, "name": "Ben", "country": "FR", "segment": "basic", "version": 1,
                               "event_time": "2026-03-01T12:00:30Z"})]],
}


def batches(pattern: str) -> list[list[Record]]:
    return [[Record(topic, key.encode(), json.dumps(value).encode(), "event") for topic, key, value in batch]
            for batch in TRIPS[pattern]]


def shown(value) -> str:
    """A stored value as the page shows it: named fields, times in ISO 8601 (a time the processor
    stores as microseconds or milliseconds since the epoch too)."""
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3]
    if isinstance(value, int) and not isinstance(value, bool) and (10 ** 15 <= value < 10 ** 17 or 10 ** 12 <= value < 10 ** 14):
        seconds = value / 1_000_000 if value >= 10 ** 15 else value / 1000
        return shown(datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc))
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return f"{type(value).__name__}({', '.join(f'{n}={shown(v)}' for n, v in zip(value._fields, value))})"
    if hasattr(value, "asDict"):
        return f"Row({', '.join(f'{n}={shown(v)}' for n, v in value.asDict().items())})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(shown(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(k)}: {shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def kept(tester: Tester) -> dict[tuple, str]:
    """What a stage keeps: (key, state variable) -> its value, for every key it holds."""
    return {(shown(key), name): shown(value) for kind in ("value_states", "list_states", "map_states")
            for name, variable in getattr(tester.handle, kind).items() for key, value in variable.state.items()}


def in_memory(pattern: str) -> list[str]:
    """The batches through the pattern's in-memory chain (and, for an event-time chain, the batch
    with no records that the final watermark runs): each batch's records and watermark, then what
    each stage keeps that the batch changed, key by key."""
    job = patterns.job(pattern)
    chain, lines, before = job.InMemory(), [], {}
    playing = batches(pattern) + ([[]] if any(s.event_time for s in job.STAGES) else [])
    for number, batch in enumerate(playing, 1):
        chain.batch(chain.rows(batch))
        mark = f", watermark {shown(chain.clock.watermark)}" if chain.clock else ""
        lines.append(f"batch {number}{mark}" + ("" if batch else " (no records: the watermark moved)"))
        lines += [f"  in   {r.topic}  key {r.key.decode()}  {r.value.decode()}" for r in batch]
        for stage in job.STAGES:
            now = kept(getattr(chain, stage.name))
            changed = {k: v for k, v in now.items() if before.get((stage.name, *k)) != v}
            gone = [k for k in before if k[0] == stage.name and k[1:] not in now]
            lines += [f"  {stage.name}  key {key}  {name} = {value}" for (key, name), value in sorted(changed.items())]
            lines += [f"  {stage.name}  key {key}  {name}: gone" for _, key, name in sorted(gone)]
            before = {k: v for k, v in before.items() if k[0] != stage.name} | {(stage.name, *k): v for k, v in now.items()}
    return lines


def written(spark, pattern: str) -> list[str]:
    """The records the real query writes for the batches (Spark, no broker), sorted."""
    job = patterns.job(pattern)
    rows = microbatch.run(spark, job.build, batches(pattern))
    return sorted(f"  out  {r.topic}  key {r.key}  {json.dumps(json.loads(r.value))}" for r in rows)


def trace(spark, pattern: str) -> str:
    return "\n".join([*in_memory(pattern), "written", *written(spark, pattern)]) + "\n"


if __name__ == "__main__":
    from joinlab.spark import session
    print(trace(session("traces"), sys.argv[1]), end="")
