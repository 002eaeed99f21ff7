"""The lottery's stages' contract, and the given third stage.

Three transformWithState stages, each keyed by the id its rule needs:
  1. LotteryGate, keyed by lottery (purchases: by user): the lottery rules (solution module);
  2. Coupons, keyed by user: coupons bought and spent (solution module);
  3. Draw, keyed by lottery: accepted clicks per 10-second window; when the watermark passes the
     window's end, the seeded draw names the winner (here: it is given, in the exercise too).

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

from jobs.lottery_rules import WINDOW_US, draw, message, window_start
from joinlab.events import timer_ms

EVENT, ENTRY, REJECTION, WINNER = "event", "entry", "rejection", "winner"
LOTTERY, USER, PASS = "lottery", "user", "pass"

# Stage 1's input: one valid event, routed by (entity, entity_id); times are microseconds.
EVENT_COLUMNS = ["entity", "entity_id", "event_id", "type", "t_us", "lottery_id", "user_id", "amount"]
FLOW = ("entity string, entity_id bigint, kind string, out_time timestamp, event_id string, type string, "
        "t_us bigint, lottery_id bigint, user_id bigint, amount bigint, rule string, message string, "
        "window_start_us bigint, winner_user_id bigint, winning_event_id string, entrants bigint, seed bigint")
_FIELDS = [part.split()[0] for part in FLOW.split(", ")]


def entity_key(key: tuple) -> tuple[str, int]:
    """(entity, entity_id) from the grouping key; pyspark's TwsTester hands a tuple key as (key,)."""
    return key[0] if len(key) == 1 and isinstance(key[0], tuple) else key


def flow(kind: str, entity: str, entity_id: int | None, watermark_ms: int, **fields) -> Row:
    values = dict.fromkeys(_FIELDS)
    values.update(entity=entity, entity_id=entity_id, kind=kind,
                  out_time=datetime.fromtimestamp((max(watermark_ms, 0) + 1) / 1000, timezone.utc), **fields)
    return Row(**values)


def reject(event: dict, rule: str, watermark_ms: int) -> Row:
    """The rejection of `event` (its own fields: event_id, type, t_us, lottery_id, user_id, amount)
    under `rule`, with the rule's message; it passes through the later stages unchanged."""
    route = event["user_id"] if event["user_id"] is not None else event["lottery_id"]
    return flow(REJECTION, PASS, route, watermark_ms, rule=rule,
                message=message(rule, event["type"], event["lottery_id"], event["user_id"]), **event)


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
