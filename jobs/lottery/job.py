"""Lottery: lottery events and user events co-processed by three keyed stages, 10-second
windows, and a seeded winner per window (the row contract and stage 3: given.py; stages 1 and 2:
solution.py; the rules: rules.py).

A click needs both its lottery's state (started?) and its user's coupons, and the two topics are
keyed by different ids, so no single key holds both: stage 1 is keyed by lottery, stage 2 by user,
stage 3 by lottery again, chained in one query. A record's trip, top down: the topics and their
schemas; how stage 1 keys them (ROUTES); the three stages; `outcomes`, the whole pattern as a
function of DataFrames; what goes to the output topics; then `build`, which parses each record
(joinlab.events), shuffles the events by stage 1's key, and wires it all to Kafka rows. Below it:
the output as a consumer reads it, and the stages in memory.
"""
from __future__ import annotations

import json
from datetime import datetime
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.lottery.given import EVENT_COLUMNS, FLOW, KEY, LOTTERY, REJECTION, USER, WINNER, Draw
from jobs.lottery.rules import BOUGHT, CLICKED, STARTED, WINDOW_US, Settings, settings
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import Chain
from joinlab.patterns import Interview
from joinlab.stages import Stage, chain, processors

# --- What it reads ------------------------------------------------------------------------------

LOTTERY_TOPIC, USER_TOPIC = "lottery-events", "user-events"
WINNERS_TOPIC, REJECTIONS_TOPIC, DEAD_LETTERS_TOPIC = "lottery-winners", "lottery-rejections", "lottery-dlq"
INPUT_TOPICS = [LOTTERY_TOPIC, USER_TOPIC]
OUTPUT_TOPICS = [WINNERS_TOPIC, REJECTIONS_TOPIC, DEAD_LETTERS_TOPIC]

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

# --- How it keys, and its stages ----------------------------------------------------------------

# Stage 1's keys (KEY, given.py): a lottery's starts and clicks by lottery (a click needs to know it started),
# purchases by user. Stage 2 keys by user, stage 3 by lottery (the rows' own entity and entity_id).
_A_CLICK = Check(f"`type` = '{CLICKED}'", lambda e: e["type"] == CLICKED, "a click")
ROUTES = [Route(LOTTERY_EVENTS, LOTTERY, "lottery_id"), Route(USER_EVENTS, LOTTERY, "lottery_id", when=_A_CLICK),
          Route(USER_EVENTS, USER, "user_id")]
# A stage re-keys a row by the (entity, id) it emits it with (given.py's `flow`): each stage after
# the first groups anew, a shuffle where joinlab.stages.chain groups it.
STAGES = [
    # by lottery: the lottery's rules; an accepted click goes on keyed by its user
    Stage("gate", "jobs.lottery.solution.LotteryGate", KEY, FLOW, event_time=True, out_time=True),
    # by user: coupons spent; a click with a coupon goes on keyed by its lottery
    Stage("coupons", "jobs.lottery.solution.Coupons", KEY, FLOW, event_time=True, out_time=True),
    # by lottery: a winner per window, when the watermark passes its end
    Stage("draw", Draw, KEY, FLOW, event_time=True, make=lambda c: (c.seed,))]


def outcomes(events: DataFrame, config: Settings, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: valid events (parse_events' frame) in, outcomes out (FLOW rows of
    kind "winner" or "rejection"). One frame out, not two: two branches would plan the stages twice.

    Spark drops input rows behind the watermark before a transformWithState sees them, without a
    word. Stage 1 gets the event time as plain microseconds instead (t_us carries no watermark
    metadata), so it sees a late event and rejects it with a reason; the watermark still advances."""
    timed = events.withWatermark("event_time", f"{config.watermark_delay_ms} milliseconds")
    keyed = timed.select("entity", "entity_id", "event_id", "type",  # the key ROUTES gave them
                         F.unix_micros("event_time").alias("t_us"), "lottery_id", "user_id", "amount")
    return chain(keyed.select(*EVENT_COLUMNS), STAGES, solution, config)


# --- What it writes -----------------------------------------------------------------------------

def to_kafka_rows(decided: DataFrame) -> DataFrame:
    """Outcomes as Kafka sink rows: winners keyed by lottery, rejections keyed by event id."""
    winner = F.to_json(F.struct("lottery_id", F.timestamp_micros("window_start_us").alias("window_start"),
                                F.timestamp_micros(F.col("window_start_us") + WINDOW_US).alias("window_end"),
                                "winner_user_id", "winning_event_id", "entrants", "seed"))
    rejection = F.to_json(F.struct("event_id", "type", F.timestamp_micros("t_us").alias("event_time"),
                                   "lottery_id", "user_id", "amount", "rule", "message"),
                          {"ignoreNullFields": "false"})
    is_winner = F.col("kind") == WINNER
    return decided.where(F.col("kind").isin(WINNER, REJECTION)).select(
        F.when(is_winner, WINNERS_TOPIC).otherwise(REJECTIONS_TOPIC).alias("topic"),
        F.when(is_winner, F.col("lottery_id").cast("string")).otherwise(F.col("event_id")).alias("key"),
        F.when(is_winner, winner).otherwise(rejection).alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: winners, rejections, dead letters.
    The seed and the watermark delay are read from the environment here ($LOTTERY_SEED,
    $LOTTERY_WATERMARK_DELAY; see jobs/lottery/rules.py)."""
    parsed = parse_events(raw, [LOTTERY_EVENTS, USER_EVENTS], DEAD_LETTERS_TOPIC, job="lottery")
    # One shuffle by stage 1's key, shared by the events and the dead letters: Kafka is read once. Each
    # stage still groups anew (Spark's watermark operator does not pass its input's partitioning on).
    by_entity = parsed.repartition(route_columns(ROUTES, KEY))
    return to_kafka_rows(outcomes(by_entity.events, settings(), solution)).unionByName(by_entity.dead_letters)


# --- The rest of the pattern's parts (joinlab.patterns.Job) -------------------------------------

SOLUTION, PROCESSORS = "jobs.lottery.solution", processors(STAGES)
SPARK_CONF, LOOKUP, SETTINGS = {}, None, ("LOTTERY_SEED", "LOTTERY_WATERMARK_DELAY")
INTERVIEW = Interview(level="3, event-time rules across two keys", time_box="60-90 min", key="outcome")


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


# --- The stages in memory -----------------------------------------------------------------------

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
