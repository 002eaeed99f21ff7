"""Lottery: lottery events and user events co-processed by three keyed stages, 10-second windows, and a
seeded winner per window.

A click needs both its lottery's state (started?) and its user's coupons, and the two topics are
keyed by different ids, so no single key holds both: stage 1 is keyed by lottery, stage 2 by user,
stage 3 by lottery again, chained in one query. The query, top down: the topics and their schemas;
how stage 1 keys them (ROUTES); `build`, its heart. Last, `query`, Kafka to Kafka, which runs it.
The row contract and stage 3 are given.py; stages 1 and 2, solution.py; the rules, rules.py; the
output as a consumer reads it, consumer.py; the stages in memory, in_memory.py. One record's trip
through it, its key and what each stage keeps: README.md, "One record's trip".
"""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from jobs.lottery.given import FLOW, KEY, LOTTERY, REJECTION, USER, WINNER, Draw
from jobs.lottery.rules import BOUGHT, CLICKED, STARTED, WINDOW_US, settings
from joinlab.kit import solutions
from joinlab.kit.events import Check, EventSchema, Route, parse_events, route_columns
from joinlab.kit.kafka import Kafka

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

# Stage 1's key (KEY: entity, entity_id): a lottery's starts and its clicks by lottery (a click needs
# to know it started), purchases by user. The first route that matches an event wins.
_A_CLICK = Check(f"`type` = '{CLICKED}'", lambda e: e["type"] == CLICKED, "a click")
ROUTES = [Route(LOTTERY_EVENTS, LOTTERY, "lottery_id"), Route(USER_EVENTS, LOTTERY, "lottery_id", when=_A_CLICK),
          Route(USER_EVENTS, USER, "user_id")]

# The processors a solution module defines (stages 1 and 2): the lab's, or a candidate's of those names.
SOLUTION, PROCESSORS = "jobs.lottery.solution", ("LotteryGate", "Coupons")


def output_records(decided: DataFrame) -> DataFrame:
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
    """Kafka records in (the connector's columns), Kafka records (topic, key, value) out. The seed
    and the watermark delay are read from the environment here (rules.py)."""
    parsed = parse_events(raw, [LOTTERY_EVENTS, USER_EVENTS], DEAD_LETTERS_TOPIC, job="lottery")
    # The query's first shuffle, by stage 1's key, shared by the events and the dead letters: Kafka is
    # read once. Each stage still groups anew (the watermark operator does not pass its partitioning on).
    by_entity = parsed.shuffle(route_columns(ROUTES, KEY))
    config, processors = settings(), solutions.of(SOLUTION, PROCESSORS, solution)
    # Spark drops rows behind the watermark before a transformWithState sees them, without a word.
    # Stage 1 gets the event time as plain microseconds (t_us carries no watermark), so it sees a
    # late event and rejects it with a reason; the watermark still advances.
    events = (by_entity.events.withWatermark("event_time", f"{config.watermark_delay_ms} milliseconds")
              .select("entity", "entity_id", "event_id", "type", F.unix_micros("event_time").alias("t_us"),
                      "lottery_id", "user_id", "amount"))
    # Each stage emits a row keyed by the (entity, entity_id) of the stage it goes to next (given.py's
    # `flow`), and each groups by that key: a shuffle per stage. Their rows' emitted_at (the
    # watermark they were emitted at, + 1 ms) is the next stage's event time.
    gated = (events  # by lottery: the lottery's rules; an accepted click goes on keyed by its user
             .groupBy("entity", "entity_id")
             .transformWithState(processors.LotteryGate(), FLOW, "Append", "EventTime",
                                 eventTimeColumnName="emitted_at"))
    entered = (gated  # by user: coupons spent; a click with a coupon goes on keyed by its lottery
               .groupBy("entity", "entity_id")
               .transformWithState(processors.Coupons(), FLOW, "Append", "EventTime",
                                   eventTimeColumnName="emitted_at"))
    decided = (entered  # by lottery: a winner per window, when the watermark passes its end (to Kafka:
               .groupBy("entity", "entity_id")  # no operator after it reads its rows' time)
               .transformWithState(Draw(config.seed), FLOW, "Append", "EventTime"))
    return output_records(decided).unionByName(by_entity.dead_letters)


def query(spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
    """The job: its topics read, `build`, the rows written to the topics they name."""
    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    out = build(kafka.incoming(raw), solution)
    return kafka.outgoing(out).writeStream.format("kafka").options(**kafka.sink()).outputMode("append")
