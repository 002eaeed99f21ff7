"""The lottery's stages in memory: the query's stateful calls as declarations (STAGES), run through
pyspark's TwsTester one micro-batch at a time, with no Spark session (unit tests, the grader).
tests/test_queries.py checks STAGES against the query's plan."""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import Row

from jobs.lottery.consumer import by_key, winner_key
from jobs.lottery.given import EVENT_COLUMNS, FLOW, KEY, WINNER, Draw
from jobs.lottery.job import LOTTERY_EVENTS, ROUTES, USER_EVENTS
from jobs.lottery.rules import WINDOW_US, Settings, settings
from joinlab.kit.events import EventSchema, micros, moment, routed, valid_events
from joinlab.kit.in_memory import Chain
from joinlab.kit.stages import Stage

STAGES = [
    Stage("gate", "jobs.lottery.solution.LotteryGate", KEY, FLOW, event_time=True, emits_time=True),
    Stage("coupons", "jobs.lottery.solution.Coupons", KEY, FLOW, event_time=True, emits_time=True),
    Stage("draw", Draw, KEY, FLOW, event_time=True, make=lambda c: (c.seed,))]


def event_row(schema: EventSchema, event: dict) -> Row:
    """One valid event as stage 1 gets it, keyed by ROUTES; times in microseconds."""
    return Row(**dict(routed(ROUTES, schema, event, EVENT_COLUMNS, KEY), t_us=micros(event["event_time"])))


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session. A batch's
    watermark is the newest event time of earlier batches - the delay."""

    def __init__(self, solution: ModuleType | None = None, seed: int | None = None, delay_ms: int | None = None):
        base = settings() if seed is None or delay_ms is None else None
        config = Settings(base.seed if seed is None else seed,
                          base.watermark_delay_ms if delay_ms is None else delay_ms)
        super().__init__(STAGES, solution, config, config.watermark_delay_ms)

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as stage 1's rows."""
        return [event_row(schema, e) for schema, e in valid_events(records, [LOTTERY_EVENTS, USER_EVENTS])]

    def views(self, out: list[Row]) -> dict:
        """The outcome rows as the output topics' views, by the same keys as `actual`."""
        return by_key(self._outcome(r) for r in out)

    @staticmethod
    def _outcome(r: Row) -> tuple[str, dict]:
        if r.kind == WINNER:
            start = moment(r.window_start_us)
            return winner_key(r.lottery_id, start), {
                "lottery_id": r.lottery_id, "window_start": start,
                "window_end": moment(r.window_start_us + WINDOW_US), "winner_user_id": r.winner_user_id,
                "winning_event_id": r.winning_event_id, "entrants": r.entrants, "seed": r.seed}
        return f"rejection {r.event_id}", {
            "event_id": r.event_id, "type": r.type, "event_time": moment(r.t_us), "lottery_id": r.lottery_id,
            "user_id": r.user_id, "amount": r.amount, "rule": r.rule, "message": r.message}
