"""The lottery's three transformWithState stages, each keyed by the id its rule needs.

  1. LotteryGate, keyed by lottery (purchases: by user): drops duplicate event ids, rejects events
     behind the watermark, and applies the lottery rules (double start, inactive lottery) in
     event-time order once the watermark has passed an event; clicks go on, keyed by user.
  2. Coupons, keyed by user: purchases and those clicks in event-time order; a click uses a coupon.
  3. Draw, keyed by lottery: accepted clicks per 10-second window; when the watermark passes the
     window's end, the seeded draw names the winner.

Why wait for the watermark instead of applying rules on arrival: then no decision depends on the
order the two topics were read, on partitions or on micro-batch boundaries; only on event times.
Every stage emits one row shape (FLOW); rows a stage does not own (entity "pass": rejections)
go through it unchanged, so the query scans its source once and each stage has one input.
Emitted rows carry out_time = watermark + 1 ms: the chained operators' event-time column, which
must never be behind the watermark (the original event time is kept in t_us).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.lottery_rules import (ALREADY_STARTED, BOUGHT, INACTIVE, LATE, NO_COUPON, NON_POSITIVE, STARTED,
                                WINDOW_US, draw, message, order_key, window_start)
from joinlab.events import timer_ms

EVENT, ENTRY, REJECTION, WINNER = "event", "entry", "rejection", "winner"
LOTTERY, USER, PASS = "lottery", "user", "pass"

# Stage 1's input: one valid event, routed by (entity, entity_id); times are microseconds.
EVENT_COLUMNS = ["entity", "entity_id", "event_id", "type", "t_us", "lottery_id", "user_id", "amount"]
FLOW = ("entity string, entity_id bigint, kind string, out_time timestamp, event_id string, type string, "
        "t_us bigint, lottery_id bigint, user_id bigint, amount bigint, rule string, message string, "
        "window_start_us bigint, winner_user_id bigint, winning_event_id string, entrants bigint, seed bigint")
_FIELDS = [part.split()[0] for part in FLOW.split(", ")]
PENDING = "type string, t_us bigint, lottery_id bigint, user_id bigint, amount bigint"


def entity_key(key: tuple) -> tuple[str, int]:
    """(entity, entity_id) from the grouping key; pyspark's TwsTester hands a tuple key as (key,)."""
    return key[0] if len(key) == 1 and isinstance(key[0], tuple) else key


def flow(kind: str, entity: str, entity_id: int | None, watermark_ms: int, **fields) -> Row:
    values = dict.fromkeys(_FIELDS)
    values.update(entity=entity, entity_id=entity_id, kind=kind,
                  out_time=datetime.fromtimestamp((max(watermark_ms, 0) + 1) / 1000, timezone.utc), **fields)
    return Row(**values)


def _event_fields(event_id: str, p) -> dict:
    """The event's own fields from a row or a PENDING tuple (type, t_us, lottery_id, user_id, amount)."""
    kind, t_us, lottery_id, user_id, amount = p
    return dict(event_id=event_id, type=kind, t_us=t_us, lottery_id=lottery_id, user_id=user_id, amount=amount)


def reject(event: dict, rule: str, watermark_ms: int) -> Row:
    route = event["user_id"] if event["user_id"] is not None else event["lottery_id"]
    return flow(REJECTION, PASS, route, watermark_ms, rule=rule,
                message=message(rule, event["type"], event["lottery_id"], event["user_id"]), **event)


def _pending(row) -> tuple:
    return row.type, row.t_us, row.lottery_id, row.user_id, row.amount


class _EventTimeBuffer(StatefulProcessor):
    """Buffers a key's events until the watermark passes them, then hands them over in
    (event time, type, event id) order: the one ordering every stage shares."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.pending = handle.getMapState("pending", "event_id string", PENDING)

    def hold(self, event_id: str, pending: tuple) -> None:
        self.pending.updateValue((event_id,), pending)
        self.handle.registerTimer(timer_ms(pending[1]))

    def due(self, watermark_ms: int) -> list[dict]:
        """The held events at or behind the watermark, in order; they leave the buffer."""
        ready = [_event_fields(event_id, p) for (event_id,), p in self.pending.iterator()
                 if p[1] <= watermark_ms * 1000]
        ready.sort(key=lambda e: order_key(e["t_us"], e["type"], e["event_id"]))
        for event in ready:
            self.pending.removeKey((event["event_id"],))
        return ready

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        for event in self.due(watermark):  # the first timer of a batch takes every due event
            yield from self.decide(key, event, watermark)

    def decide(self, key, event: dict, watermark_ms: int) -> Iterator[Row]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LotteryGate(_EventTimeBuffer):
    """Stage 1, keyed by ("lottery", id) for starts and clicks, ("user", id) for purchases."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.seen = handle.getMapState("seen", "event_id string", "t_us bigint")  # every id taken in, for dedup
        self.started = handle.getValueState("started", "t_us bigint")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        entity = entity_key(key)[0]
        watermark = timerValues.getCurrentWatermarkInMs()
        for row in rows:
            if self.seen.containsKey((row.event_id,)):
                continue  # an identical re-send
            self.seen.updateValue((row.event_id,), (row.t_us,))
            event = _event_fields(row.event_id, _pending(row))
            if row.t_us <= watermark * 1000:
                yield reject(event, LATE, watermark)  # its turn has passed: deciding it now would reorder
            elif entity == USER:
                yield flow(EVENT, USER, row.user_id, watermark, **event)  # coupons are stage 2's
            else:
                self.hold(row.event_id, _pending(row))

    def decide(self, key, event: dict, watermark_ms: int) -> Iterator[Row]:
        if event["type"] == STARTED:
            if self.started.exists():
                yield reject(event, ALREADY_STARTED, watermark_ms)
            else:
                self.started.update((event["t_us"],))
        elif not self.started.exists():  # a click: in event-time order, so "started at or before it"
            yield reject(event, INACTIVE, watermark_ms)
        else:
            yield flow(EVENT, USER, event["user_id"], watermark_ms, **event)


class Coupons(_EventTimeBuffer):
    """Stage 2, keyed by ("user", id): purchases and clicks in event-time order."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.coupons = handle.getValueState("coupons", "coupons bigint")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        for row in rows:
            if entity_key(key)[0] == PASS:
                yield row
            else:
                self.hold(row.event_id, _pending(row))

    def decide(self, key, event: dict, watermark_ms: int) -> Iterator[Row]:
        coupons = self.coupons.get()[0] if self.coupons.exists() else 0
        if event["type"] == BOUGHT:
            if event["amount"] <= 0:
                yield reject(event, NON_POSITIVE, watermark_ms)
                return
            coupons += event["amount"]
        elif coupons == 0:
            yield reject(event, NO_COUPON, watermark_ms)
            return
        else:
            coupons -= 1  # the original's `coupons--` returned the old value and stored nothing
            yield flow(ENTRY, LOTTERY, event["lottery_id"], watermark_ms, **event)
        self.coupons.update((coupons,))


class Draw(StatefulProcessor):
    """Stage 3, keyed by ("lottery", id): accepted clicks per window; a window closes when the
    watermark reaches its end, and the seeded draw picks its winner."""

    def __init__(self, seed: int):
        self.seed = seed

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.entries = handle.getMapState("entries", "window_start_us bigint, event_id string",
                                          "user_id bigint, t_us bigint")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        for row in rows:
            if entity_key(key)[0] == PASS:
                yield row
                continue
            start = window_start(row.t_us)
            self.entries.updateValue((start, row.event_id), (row.user_id, row.t_us))
            self.handle.registerTimer(timer_ms(start + WINDOW_US))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark, lottery_id = timerValues.getCurrentWatermarkInMs(), entity_key(key)[1]
        windows: dict[int, list] = {}
        for (start, event_id), (user_id, t_us) in list(self.entries.iterator()):
            if start + WINDOW_US <= watermark * 1000:
                windows.setdefault(start, []).append((t_us, event_id, user_id))
                self.entries.removeKey((start, event_id))
        for start, entrants in sorted(windows.items()):
            _, event_id, user_id = draw(self.seed, lottery_id, start, entrants)
            yield flow(WINNER, LOTTERY, lottery_id, watermark, lottery_id=lottery_id, window_start_us=start,
                       winner_user_id=user_id, winning_event_id=event_id, entrants=len(entrants), seed=self.seed)

    def close(self) -> None:
        pass
