"""The lottery's stages' contract, and the given third stage.

Three transformWithState stages, each keyed by the id its rule needs:
  1. LotteryGate, keyed by lottery (purchases: by user): the lottery rules (solution module);
  2. Coupons, keyed by user: coupons bought and spent (solution module);
  3. Draw, keyed by lottery: accepted clicks per 10-second window; when the watermark passes the
     window's end, the seeded draw names the winner (here: it is given, in the exercise too).

Every stage emits one row shape (FLOW, joinlab.kit.stages.Flow); rows a stage does not own (entity
"pass": rejections) go through it unchanged, so the query has one input and one output and each
stage one input.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.lottery.rules import WINDOW_US, draw, message, window_start
from joinlab.kit.events import timer_ms
from joinlab.kit.typed_state import KeyState, grouping_key  # noqa: F401 (grouping_key: for the solution and exercise)
from joinlab.kit.stages import Flow

EVENT, ENTRY, REJECTION, WINNER = "event", "entry", "rejection", "winner"
LOTTERY, USER, PASS = "lottery", "user", "pass"

KEY = ("entity", "entity_id")  # every stage groups by the rows' own (entity, id)
# Stage 1's input: one valid event, routed by KEY; times are microseconds.
EVENT_COLUMNS = ["entity", "entity_id", "event_id", "type", "t_us", "lottery_id", "user_id", "amount"]
FLOW = ("entity string, entity_id bigint, kind string, emitted_at timestamp, event_id string, type string, "
        "t_us bigint, lottery_id bigint, user_id bigint, amount bigint, rule string, message string, "
        "window_start_us bigint, winner_user_id bigint, winning_event_id string, entrants bigint, seed bigint")
flow = Flow(FLOW, KEY)  # flow(kind, entity, entity_id, watermark_ms, **fields) -> Row


def reject(event: dict, rule: str, watermark_ms: int) -> Row:
    """The rejection of `event` (its own fields: event_id, type, t_us, lottery_id, user_id, amount)
    under `rule`, with the rule's message; it passes through the later stages unchanged."""
    route = event["user_id"] if event["user_id"] is not None else event["lottery_id"]
    return flow(REJECTION, PASS, route, watermark_ms, rule=rule,
                message=message(rule, event["type"], event["lottery_id"], event["user_id"]), **event)


class Entry(NamedTuple):
    """An accepted click in an open window."""
    window_start_us: int
    event_id: str
    user_id: int
    t_us: int


class Entries(NamedTuple):
    """A lottery's accepted clicks in windows not drawn yet, and the one timer registered: the
    earliest open window's end."""
    timer: int | None
    entries: list[Entry]


class Draw(StatefulProcessor):
    """Stage 3, keyed by ("lottery", id): accepted clicks per window; a window closes when the
    watermark reaches its end, and the seeded draw picks its winner. The key's entries are one
    value, read and written once per batch, with one timer at a time."""

    def __init__(self, seed: int):
        self.seed = seed

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.entries = KeyState(handle, "entries", Entries, Entries(None, []))

    def _store(self, key, value: Entries) -> None:
        """The key's entries, its one timer at the earliest open window's end."""
        due = min((timer_ms(e.window_start_us + WINDOW_US) for e in value.entries), default=None)
        self.entries.put(key, value, due)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        if grouping_key(key)[0] == PASS:
            yield from rows
            return
        value = self.entries.get(key, timerValues)
        added = [Entry(window_start(r.t_us), r.event_id, r.user_id, r.t_us) for r in rows]
        self._store(key, value._replace(entries=value.entries + added))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark, lottery_id = timerValues.getCurrentWatermarkInMs(), grouping_key(key)[1]
        value = self.entries.get(key, timerValues, expiredTimerInfo)
        windows: dict[int, list] = {}
        for e in value.entries:
            if e.window_start_us + WINDOW_US <= watermark * 1000:
                windows.setdefault(e.window_start_us, {})[e.event_id] = (e.t_us, e.event_id, e.user_id)
        self._store(key, value._replace(entries=[e for e in value.entries if e.window_start_us not in windows]))
        for start, entrants in sorted(windows.items()):
            _, event_id, user_id = draw(self.seed, lottery_id, start, list(entrants.values()))
            yield flow(WINNER, LOTTERY, lottery_id, watermark, lottery_id=lottery_id, window_start_us=start,
                       winner_user_id=user_id, winning_event_id=event_id, entrants=len(entrants), seed=self.seed)
