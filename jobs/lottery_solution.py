"""The lottery, the solution's first two stages (contract and the given Draw: lottery_stages.py;
the wiring: lottery.py).

  1. LotteryGate, keyed by lottery (purchases: by user): drops duplicate event ids, rejects events
     behind the watermark, and applies the lottery rules (double start, inactive lottery) in
     event-time order once the watermark has passed an event; clicks go on, keyed by user.
  2. Coupons, keyed by user: purchases and those clicks in event-time order; a click uses a coupon.

Why wait for the watermark instead of applying rules on arrival: then no decision depends on the
order the two topics were read, on partitions or on micro-batch boundaries; only on event times.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.lottery_rules import (ALREADY_STARTED, BOUGHT, INACTIVE, LATE, NO_COUPON, NON_POSITIVE, STARTED,
                                order_key)
from jobs.lottery_stages import ENTRY, EVENT, LOTTERY, PASS, USER, entity_key, flow, reject
from joinlab.events import timer_ms

PENDING = "type string, t_us bigint, lottery_id bigint, user_id bigint, amount bigint"


def _event_fields(event_id: str, p) -> dict:
    """The event's own fields from a row or a PENDING tuple (type, t_us, lottery_id, user_id, amount)."""
    kind, t_us, lottery_id, user_id, amount = p
    return dict(event_id=event_id, type=kind, t_us=t_us, lottery_id=lottery_id, user_id=user_id, amount=amount)


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
