"""Lottery: lottery events and user events co-processed by three keyed stages, 10-second
windows, and a seeded winner per window (stages: given.py, solution.py; rules: rules.py).

A click needs both its lottery's state (started?) and its user's coupons, and the two topics are
keyed by different ids, so no single key holds both: stage 1 is keyed by lottery, stage 2 by user,
stage 3 by lottery again, chained in one query. `decide` is the whole pattern as a function of
DataFrames; `build` wires it to Kafka rows. The first two stages come from a solution module
(joinlab.solutions); `InMemory` runs the three without Spark.
"""
from __future__ import annotations

import json
from datetime import datetime
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.lottery.given import EVENT_COLUMNS, FLOW, LOTTERY, REJECTION, USER, WINNER, Draw
from jobs.lottery.rules import BOUGHT, CLICKED, STARTED, WINDOW_US, settings
from joinlab import solutions
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import NEVER_LATE, EventTime, Pipeline, Tester, advance, feed, out_ms

LOTTERY_TOPIC, USER_TOPIC = "lottery-events", "user-events"
WINNERS_TOPIC, REJECTIONS_TOPIC, DEAD_LETTERS_TOPIC = "lottery-winners", "lottery-rejections", "lottery-dlq"
INPUT_TOPICS = [LOTTERY_TOPIC, USER_TOPIC]
OUTPUT_TOPICS = [WINNERS_TOPIC, REJECTIONS_TOPIC, DEAD_LETTERS_TOPIC]
SOLUTION, PROCESSORS = "jobs.lottery.solution", ("LotteryGate", "Coupons")

_ID = Check("length(event_id) > 0", lambda e: len(e["event_id"]) > 0, "invalid field: event_id (must not be empty)")
LOTTERY_EVENTS = EventSchema(
    LOTTERY_TOPIC, {"event_id": "string", "type": "string", "lottery_id": "bigint", "event_time": "timestamp"},
    checks=(_ID, Check(f"`type` = '{STARTED}'", lambda e: e["type"] == STARTED,
                       f"invalid field: type (must be {STARTED})")))
USER_EVENTS = EventSchema(
    USER_TOPIC, {"event_id": "string", "type": "string", "user_id": "bigint", "amount": "bigint",
                 "lottery_id": "bigint", "event_time": "timestamp"},
    optional=("amount", "lottery_id"),
    checks=(_ID,
            Check(f"`type` IN ('{BOUGHT}', '{CLICKED}')", lambda e: e["type"] in (BOUGHT, CLICKED),
                  f"invalid field: type (must be {BOUGHT} or {CLICKED})"),
            Check(f"`type` <> '{BOUGHT}' OR amount IS NOT NULL",
                  lambda e: e["type"] != BOUGHT or e.get("amount") is not None,
                  f"missing field: amount ({BOUGHT} needs it)"),
            Check(f"`type` <> '{CLICKED}' OR lottery_id IS NOT NULL",
                  lambda e: e["type"] != CLICKED or e.get("lottery_id") is not None,
                  f"missing field: lottery_id ({CLICKED} needs it)")))

# Stage 1's keys: a lottery's starts and clicks by lottery (a click needs to know whether it started),
# purchases by user. Stage 2 keys by user, stage 3 by lottery (the rows' own entity and entity_id).
_A_CLICK = Check(f"`type` = '{CLICKED}'", lambda e: e["type"] == CLICKED, "a click")
ROUTES = [Route(LOTTERY_EVENTS, LOTTERY, "lottery_id"), Route(USER_EVENTS, LOTTERY, "lottery_id", when=_A_CLICK),
          Route(USER_EVENTS, USER, "user_id")]


def decide(events: DataFrame, seed: int, watermark_delay_ms: int, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: valid events (parse_events' frame) in, outcomes out (FLOW rows of
    kind "winner" or "rejection"). One frame out, not two: two branches would plan the stages twice.

    Spark drops input rows behind the watermark before a transformWithState sees them, without a
    word. Stage 1 gets the event time as plain microseconds instead (t_us carries no watermark
    metadata), so it sees a late event and rejects it with a reason; the watermark still advances."""
    stages = solutions.of(SOLUTION, PROCESSORS, solution)
    timed = events.withWatermark("event_time", f"{watermark_delay_ms} milliseconds")
    keyed = timed.select("entity", "entity_id", "event_id", "type",  # keyed by parse_events
                         F.unix_micros("event_time").alias("t_us"), "lottery_id", "user_id", "amount")
    gated = keyed.select(*EVENT_COLUMNS).groupBy("entity", "entity_id").transformWithState(
        stages.LotteryGate(), FLOW, "Append", "EventTime", eventTimeColumnName="out_time")
    spent = gated.groupBy("entity", "entity_id").transformWithState(
        stages.Coupons(), FLOW, "Append", "EventTime", eventTimeColumnName="out_time")
    return spent.groupBy("entity", "entity_id").transformWithState(Draw(seed), FLOW, "Append", "EventTime")


def to_kafka_rows(outcomes: DataFrame) -> DataFrame:
    """Outcomes as Kafka sink rows: winners keyed by lottery, rejections keyed by event id."""
    winner = F.to_json(F.struct("lottery_id", F.timestamp_micros("window_start_us").alias("window_start"),
                                F.timestamp_micros(F.col("window_start_us") + WINDOW_US).alias("window_end"),
                                "winner_user_id", "winning_event_id", "entrants", "seed"))
    rejection = F.to_json(F.struct("event_id", "type", F.timestamp_micros("t_us").alias("event_time"),
                                   "lottery_id", "user_id", "amount", "rule", "message"),
                          {"ignoreNullFields": "false"})
    is_winner = F.col("kind") == WINNER
    return outcomes.where(F.col("kind").isin(WINNER, REJECTION)).select(
        F.when(is_winner, WINNERS_TOPIC).otherwise(REJECTIONS_TOPIC).alias("topic"),
        F.when(is_winner, F.col("lottery_id").cast("string")).otherwise(F.col("event_id")).alias("key"),
        F.when(is_winner, winner).otherwise(rejection).alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: winners, rejections, dead letters.
    The seed and the watermark delay are read from the environment here ($LOTTERY_SEED,
    $LOTTERY_WATERMARK_DELAY; see jobs/lottery/rules.py)."""
    parsed = parse_events(raw, [LOTTERY_EVENTS, USER_EVENTS], DEAD_LETTERS_TOPIC, job="lottery",
                          key=dict(zip(("entity", "entity_id"), route_columns(ROUTES))))
    config = settings()
    outcomes = decide(parsed.events, config.seed, config.watermark_delay_ms, solution)
    return to_kafka_rows(outcomes).unionByName(parsed.dead_letters)


class InMemory(Pipeline):
    """decide's three stages through pyspark's TwsTester, one micro-batch at a time. Stage 1's
    watermark is the batch's; stages 2 and 3 take their input first and then fire their timers
    (Spark handles a batch's input before its timers)."""

    def __init__(self, solution: ModuleType | None = None, seed: int | None = None, delay_ms: int | None = None):
        stages = solutions.of(SOLUTION, PROCESSORS, solution)
        config = settings() if seed is None or delay_ms is None else None
        self.seed = config.seed if seed is None else seed
        self.gate = Tester(stages.LotteryGate, timeMode="EventTime", eventTimeExtractor=lambda r: NEVER_LATE)
        self.coupons = Tester(stages.Coupons, timeMode="EventTime", eventTimeExtractor=out_ms)
        self.draw = Tester(lambda: Draw(self.seed), timeMode="EventTime", eventTimeExtractor=out_ms)
        self.clock = EventTime(config.watermark_delay_ms if delay_ms is None else delay_ms)

    def rows(self, records) -> list[Row]:
        """Valid input records as stage 1's rows."""
        return [event_row(schema, e) for schema, e in valid_events(records, [LOTTERY_EVENTS, USER_EVENTS])]

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[Row]:
        """One micro-batch; its watermark is the newest event time of earlier batches - delay."""
        watermark = self.clock.next(watermark)
        key = lambda r: (r.entity, r.entity_id)  # noqa: E731
        out1 = advance(self.gate, watermark) + feed(self.gate, rows, key)
        out2 = feed(self.coupons, out1, key) + advance(self.coupons, watermark)
        out3 = feed(self.draw, out2, key) + advance(self.draw, watermark)
        self.clock.done(watermark, rows)
        return out3

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


def event_row(schema: EventSchema, event: dict) -> Row:
    """One valid event as stage 1 gets it, keyed by ROUTES; times in microseconds."""
    return Row(**dict(routed(ROUTES, schema, event, EVENT_COLUMNS), t_us=micros(event["event_time"])))


# --- Reading the output topics: what a consumer keeps -----------------------------------------

def winner_key(lottery_id: int, start: datetime) -> str:
    return f"winner {lottery_id} {start.isoformat()}"


def parse_output(topic: str, value: bytes) -> tuple[str, dict]:
    body = json.loads(value)
    if topic == WINNERS_TOPIC:
        view = dict(body, window_start=parse_time(body["window_start"]), window_end=parse_time(body["window_end"]))
        return winner_key(view["lottery_id"], view["window_start"]), view
    return f"rejection {body['event_id']}", dict(body, event_time=parse_time(body["event_time"]))


def by_key(pairs) -> dict[str, dict]:
    """key -> view of (key, view) pairs; a key with two different views maps to both (so it can't
    equal the reference)."""
    views: dict[str, dict] = {}
    for key, view in pairs:
        views[key] = view if views.get(key, view) == view else {"conflicting": [views[key], view]}
    return views


def actual(records: list) -> dict[str, dict]:
    """Every winner and rejection on the output topics, `by_key`."""
    outcomes = (WINNERS_TOPIC, REJECTIONS_TOPIC)
    return by_key(parse_output(r.topic, r.value) for r in records if r.topic in outcomes)


def version(view: dict) -> tuple:
    """Outcomes are final, never updated: every record of a key has the same version."""
    return ()
