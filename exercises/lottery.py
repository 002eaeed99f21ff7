"""Exercise 3 (event-time rules across two keys, 60-90 min): the lottery. Read lottery.md first
(in the lab: jobs/lottery/README.md, the part above its solution marker).

Write the first two of the three stages the job chains (everything else is given: jobs/lottery/job.py
parses both topics, dead-letters malformed records, keys and wires the stages, writes the output
topics; stage 3, Draw in jobs/lottery/given.py, collects the entries per 10-second window and draws
the winner when the watermark passes the window's end). All stages run in event-time mode.

Stage 1, LotteryGate, grouped by (entity, entity_id): ("lottery", lottery_id) for LotteryStarted
and Clicked, ("user", user_id) for CouponsBought. Input rows have the columns

    entity, entity_id, event_id, type, t_us, lottery_id, user_id, amount

(type: STARTED, BOUGHT or CLICKED, from jobs/lottery/rules.py; t_us: the event time in microseconds;
amount only for BOUGHT). Stage 2, Coupons, gets what stage 1 yields, grouped by the same
(entity, entity_id) columns of the rows stage 1 made.

Both stages yield rows of one shape (FLOW in jobs/lottery/given.py), made with the given helpers:

    flow(EVENT, USER, user_id, watermark_ms, **event)         an event for stage 2, keyed by user
    flow(ENTRY, LOTTERY, lottery_id, watermark_ms, **event)   a click that entered the draw (to stage 3)
    reject(event, RULE, watermark_ms)                         a rejection (goes to the output as it is)

where `event` is a dict of the event's own fields (event_id, type, t_us, lottery_id, user_id,
amount) and RULE one of rules.py's ALREADY_STARTED, NON_POSITIVE, INACTIVE, NO_COUPON,
LATE. A row whose entity is PASS (a rejection) that reaches a stage must be yielded unchanged.

The rules (lottery.md has them in full): a lottery can start once; a click counts only on a
lottery that started at or before it; a purchase must buy at least one coupon; a click spends one
coupon, and a click without one is rejected; an event id is processed once; an event behind the
watermark is rejected as late. Decide in event-time order, whatever order the topics were read.

Time: timerValues.getCurrentWatermarkInMs() is the watermark; handle.registerTimer(ms) asks for
handleExpiredTimer(key, timerValues, expiredTimerInfo) once the watermark reaches ms.
State lives in `handle`: getValueState(name, "field type, ..."), getMapState(name, "key type",
"field type, ..."); ValueState exists(), get(), update(tuple), clear(); MapState containsKey((k,)),
getValue((k,)), updateValue((k,), tuple), removeKey((k,)), iterator().

Grade it: `make check-fast`, then `make check` (in a workspace), or in the lab
`joinlab interview check lottery --solution THIS_FILE`.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.lottery.rules import (ALREADY_STARTED, BOUGHT, CLICKED, INACTIVE, LATE, NO_COUPON,  # noqa: F401
                                NON_POSITIVE, STARTED)
from jobs.lottery.given import ENTRY, EVENT, LOTTERY, PASS, USER, flow, grouping_key, reject  # noqa: F401


class LotteryGate(StatefulProcessor):
    """Stage 1: the lottery's rules (started? once?), duplicates and lateness."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: the state a lottery needs.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        # TODO: grouping_key(key) is ("lottery", id) or ("user", id).
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        return iter(())

    def close(self) -> None:
        pass


class Coupons(StatefulProcessor):
    """Stage 2: per user, coupons bought and spent."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: the state a user needs.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        # TODO: forward PASS rows unchanged; spend coupons on clicks.
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        return iter(())

    def close(self) -> None:
        pass
