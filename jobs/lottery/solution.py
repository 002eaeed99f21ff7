"""The lottery, the solution's first two stages (contract and the given Draw: jobs/lottery/given.py;
the wiring: jobs/lottery/job.py).

  1. LotteryGate, keyed by lottery (purchases: by user): drops duplicate event ids, rejects events
     behind the watermark, and applies the lottery rules (double start, inactive lottery) in
     event-time order once the watermark has passed an event; clicks go on, keyed by user.
  2. Coupons, keyed by user: purchases and those clicks in event-time order; a click uses a coupon.

Why wait for the watermark instead of applying rules on arrival: then no decision depends on the
order the two topics were read, on partitions or on micro-batch boundaries; only on event times.

A key's pending events are one value, read once per micro-batch and written when changed, with one timer
at a time (joinlab.kit.typed_state.KeyState): every state or timer call is a round trip to the JVM
(jobs/lottery/README.md, "State").
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.lottery.rules import (ALREADY_STARTED, BOUGHT, DEDUP_HORIZON_US, INACTIVE, LATE, NO_COUPON, NON_POSITIVE,
                                STARTED, order_key)
from jobs.lottery.given import ENTRY, EVENT, LOTTERY, PASS, USER, flow, grouping_key, reject
from joinlab.kit.events import timer_ms
from joinlab.kit.typed_state import KeyState, ddl

SEEN_BUCKET_US = 60_000_000  # seen ids are stored per minute of event time: one state entry per key and minute


class PendingEvent(NamedTuple):
    """An event waiting for the watermark: its own fields."""
    event_id: str
    type: str
    t_us: int
    lottery_id: int | None
    user_id: int | None
    amount: int | None


class Pending(NamedTuple):
    """A key's events waiting for the watermark, the one timer registered to release them (or to
    forget old seen ids), and the minutes of event time the key has seen ids of (stage 1)."""
    timer: int | None
    events: list[PendingEvent]
    seen_minutes: list[int]


class Started(NamedTuple):
    t_us: int


class Seen(NamedTuple):
    """The event ids a key took in during one minute of event time (keyed by the minute's start)."""
    ids: list[str]


class CouponCount(NamedTuple):
    coupons: int


EMPTY = Pending(None, [], [])


def _minute(t_us: int) -> int:
    return t_us - t_us % SEEN_BUCKET_US


def _forget_ms(minute_us: int) -> int:
    """The watermark at which a minute's seen ids leave: every id in it is then behind the
    watermark by more than the horizon."""
    return timer_ms(minute_us + SEEN_BUCKET_US + DEDUP_HORIZON_US)


def _pending_event(row) -> PendingEvent:
    return PendingEvent(row.event_id, row.type, row.t_us, row.lottery_id, row.user_id, row.amount)


class _PendingUntilWatermark(StatefulProcessor):
    """Buffers a key's events until the watermark passes them, then hands them over in
    (event time, type, event id) order: the one ordering every stage shares. A key's pending
    events are one value ("pending"), read once per batch; one timer per key, at the earliest event."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.pending = KeyState(handle, "pending", Pending, EMPTY)

    def store(self, key, value: Pending) -> None:
        """Write the key's pending events (read with self.pending.get in this batch), its one timer at the
        earliest time the key has something to do."""
        self.pending.put(key, value, self.next_due(value))

    def next_due(self, value: Pending) -> int | None:
        """The watermark at which the key has something to do: its earliest held event."""
        return min((timer_ms(e.t_us) for e in value.events), default=None)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        value = self.pending.get(key, timerValues, expiredTimerInfo)
        ready = sorted((e for e in value.events if e.t_us <= watermark * 1000),
                       key=lambda e: order_key(e.t_us, e.type, e.event_id))
        value = self.expire(value._replace(events=[e for e in value.events if e.t_us > watermark * 1000]), watermark)
        out = list(self.decide(key, [e._asdict() for e in ready], watermark))
        self.store(key, value)
        return iter(out)

    def expire(self, value: Pending, watermark_ms: int) -> Pending:
        return value

    def decide(self, key, events: list[dict], watermark_ms: int) -> Iterator[Row]:
        """The key's due `events`, in order."""
        raise NotImplementedError


class LotteryGate(_PendingUntilWatermark):
    """Stage 1, keyed by ("lottery", id) for starts and clicks, ("user", id) for purchases.

    Duplicate ids are dropped for DEDUP_HORIZON_US of event time behind the watermark. A re-send
    older than that is behind the watermark, so it is rejected as late (a visible rejection with
    its reason), never counted twice."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.seen = handle.getMapState("seen", "minute_us bigint", ddl(Seen))  # ids taken in, per minute
        self.started = handle.getValueState("started", ddl(Started))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        entity = grouping_key(key)[0]
        watermark = timerValues.getCurrentWatermarkInMs()
        value = self.pending.get(key, timerValues)
        rows = list(rows)
        touched = {_minute(r.t_us) for r in rows}
        minutes = {m: set(Seen(*self.seen.getValue((m,))).ids) for m in value.seen_minutes if m in touched}
        changed, held, out = set(), [], []
        for row in rows:
            minute = _minute(row.t_us)
            ids = minutes.setdefault(minute, set())
            if row.event_id in ids:
                continue  # an identical re-send
            if _forget_ms(minute) > watermark:  # else: past the horizon already, a re-send is late again
                ids.add(row.event_id)
                changed.add(minute)
            event = _pending_event(row)
            if row.t_us <= watermark * 1000:
                out.append(reject(event._asdict(), LATE, watermark))  # its turn has passed: deciding it would reorder
            elif entity == USER:
                out.append(flow(EVENT, USER, row.user_id, watermark, **event._asdict()))  # coupons are stage 2's
            else:
                held.append(event)
        for minute in changed:
            self.seen.updateValue((minute,), Seen(sorted(minutes[minute])))
        self.store(key, value._replace(events=value.events + held,
                                        seen_minutes=sorted(set(value.seen_minutes) | changed)))
        return iter(out)

    def next_due(self, value: Pending) -> int | None:
        """Also when the oldest minute of seen ids leaves the horizon."""
        forget = [_forget_ms(value.seen_minutes[0])] if value.seen_minutes else []
        return min([*forget, *(timer_ms(e.t_us) for e in value.events)], default=None)

    def expire(self, value: Pending, watermark_ms: int) -> Pending:
        """Forget the minutes of ids wholly behind watermark - horizon: a re-send of one is late."""
        keep = []
        for minute in value.seen_minutes:
            if _forget_ms(minute) <= watermark_ms:
                self.seen.removeKey((minute,))
            else:
                keep.append(minute)
        return value._replace(seen_minutes=keep)

    def decide(self, key, events: list[dict], watermark_ms: int) -> Iterator[Row]:
        started = None if not events else self.started.exists()
        for event in events:
            if event["type"] == STARTED:
                if started:
                    yield reject(event, ALREADY_STARTED, watermark_ms)
                else:
                    self.started.update(Started(event["t_us"]))
                    started = True
            elif not started:  # a click: in event-time order, so "started at or before it"
                yield reject(event, INACTIVE, watermark_ms)
            else:
                yield flow(EVENT, USER, event["user_id"], watermark_ms, **event)


class Coupons(_PendingUntilWatermark):
    """Stage 2, keyed by ("user", id): purchases and clicks in event-time order."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.coupons = handle.getValueState("coupons", ddl(CouponCount))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        if grouping_key(key)[0] == PASS:
            yield from rows
            return
        value = self.pending.get(key, timerValues)
        self.store(key, value._replace(events=value.events + [_pending_event(row) for row in rows]))

    def decide(self, key, events: list[dict], watermark_ms: int) -> Iterator[Row]:
        if not events:
            return
        stored = self.coupons.get()
        coupons = before = CouponCount(*stored).coupons if stored else 0
        for event in events:
            if event["type"] == BOUGHT:
                if event["amount"] <= 0:
                    yield reject(event, NON_POSITIVE, watermark_ms)
                else:
                    coupons += event["amount"]
            elif coupons == 0:
                yield reject(event, NO_COUPON, watermark_ms)
            else:
                coupons -= 1
                yield flow(ENTRY, LOTTERY, event["lottery_id"], watermark_ms, **event)
        if coupons != before or stored is None:
            self.coupons.update(CouponCount(coupons))
