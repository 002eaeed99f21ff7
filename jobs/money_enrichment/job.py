"""Money enrichment: transactions joined to their session and to their user as of the transaction's
time, deduplicated, first-of-type flagged; late ones enriched by a lookup service.

The query, top down: the topics and their schemas; how stage 1 keys them (ROUTES); `build`, its
heart: parse each record (joinlab.kit.events), shuffle the events by stage 1's key, group them by
session (SessionJoin, solution.py or a candidate's module), then by user (UserEnrich, given.py), ask
the lookup service about what came too late (lookup.py), and write enriched transactions and dead
letters. Last, `query`, Kafka to Kafka, which runs it. The rules and settings are rules.py; the
output as a consumer reads it, consumer.py; the stages in memory, in_memory.py. One record's trip
through it, its key and what each stage keeps: README.md, "One record's trip".
"""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from jobs.money_enrichment.given import (DEAD, ENRICHED, EVENT_COLUMNS, FLOW, KEY, SESSION, SESSION_START, TX, USER,
                                         USER_UPDATE, UserEnrich)
from jobs.money_enrichment.lookup import lookup_step
from jobs.money_enrichment.rules import TYPES, Settings, settings
from joinlab.kit import solutions
from joinlab.kit.events import Check, EventSchema, Route, micros, parse_events, route_columns, validate
from joinlab.kit.kafka import Kafka
from joinlab.lookup import LookupSettings

TRANSACTIONS_TOPIC, SESSIONS_TOPIC, USERS_TOPIC = "money-transactions", "money-sessions", "money-users"
ENRICHED_TOPIC, DEAD_LETTERS_TOPIC = "money-enriched", "money-dlq"
INPUT_TOPICS = [TRANSACTIONS_TOPIC, SESSIONS_TOPIC, USERS_TOPIC]
OUTPUT_TOPICS = [ENRICHED_TOPIC, DEAD_LETTERS_TOPIC]


def _not_empty(name: str) -> Check:
    return Check(f"length({name}) > 0", lambda e: len(e[name]) > 0, f"invalid field: {name} (must not be empty)")


TRANSACTIONS = EventSchema(
    TRANSACTIONS_TOPIC, {"tx_id": "string", "user_id": "bigint", "session_id": "string", "amount": "double",
                         "currency": "string", "type": "string", "event_time": "timestamp"},
    checks=(_not_empty("tx_id"), _not_empty("session_id"),
            Check("amount > 0", lambda e: e["amount"] > 0, "invalid field: amount (must be > 0)"),
            Check(f"`type` IN ({', '.join(repr(t) for t in TYPES)})", lambda e: e["type"] in TYPES,
                  f"invalid field: type (must be one of {', '.join(TYPES)})")))
SESSIONS = EventSchema(
    SESSIONS_TOPIC, {"session_id": "string", "user_id": "bigint", "country": "string", "device": "string",
                     "event_time": "timestamp"},
    checks=(_not_empty("session_id"),))
USERS = EventSchema(
    USERS_TOPIC, {"user_id": "bigint", "name": "string", "country": "string", "segment": "string",
                  "version": "bigint", "event_time": "timestamp"})
SCHEMAS = [TRANSACTIONS, SESSIONS, USERS]

# Stage 1's key (KEY: entity, entity_id): transactions and sessions by session, users by user (as a string).
ROUTES = [Route(TRANSACTIONS, SESSION, "session_id"), Route(SESSIONS, SESSION, "session_id"),
          Route(USERS, USER, "user_id")]
KINDS = {TRANSACTIONS_TOPIC: TX, SESSIONS_TOPIC: SESSION_START, USERS_TOPIC: USER_UPDATE}  # a row's kind, by topic

# The processor a solution module defines (stage 1): the lab's, or a candidate's of that name.
SOLUTION, PROCESSORS = "jobs.money_enrichment.solution", ("SessionJoin",)


def stage_rows(events: DataFrame, config: Settings) -> DataFrame:
    """Valid events (parse_events' frame) as stage 1's input rows, keyed by session or user.

    Spark drops rows behind the watermark before a transformWithState sees them, without a word.
    The stages get the event time as plain microseconds (t_us carries no watermark), so a late
    transaction reaches them and is looked up; the watermark still advances."""
    timed = events.withWatermark("event_time", f"{config.watermark_delay_ms} milliseconds")
    kind = F.lit(None)
    for topic, name in KINDS.items():
        kind = F.when(F.col("topic") == topic, name).otherwise(kind)
    return timed.select("entity", "entity_id",  # the key ROUTES gave them
                        kind.alias("kind"), "tx_id", "user_id", "session_id", "amount",
                        "currency", "type", F.unix_micros("event_time").alias("t_us"),
                        F.col("source_partition").cast("bigint").alias("src_partition"),
                        F.col("source_offset").cast("bigint").alias("src_offset"),
                        "country", "device", "name", "segment", "version").select(*EVENT_COLUMNS)


def users_snapshot(spark, path: str) -> DataFrame:
    """A JSON-lines file of UserUpdated events (as on the users topic) as stage 2's initial state.
    Invalid lines are refused with their line number: a bootstrap should not silently skip users."""
    rows = []
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            event, reason = validate(USERS, line.strip())
            if reason:
                raise ValueError(f"{path}:{number}: not a valid UserUpdated event ({reason})")
            rows.append((USER, str(event["user_id"]), event["user_id"], micros(event["event_time"]), event["name"],
                         event["country"], event["segment"], event["version"]))
    return spark.createDataFrame(rows, "entity string, entity_id string, user_id bigint, t_us bigint, name string, "
                                       "country string, segment string, version bigint")


def output_records(flows: DataFrame) -> DataFrame:
    """Enriched transactions keyed by tx_id; dead letters (failed lookups, conflicts) with a reason."""
    enriched = F.to_json(F.struct(
        "tx_id", "user_id", "session_id", "amount", "currency", "type",
        F.timestamp_micros("t_us").alias("event_time"), "session_country", "session_device",
        F.timestamp_micros("session_start_us").alias("session_started_at"), "user_name", "user_country",
        "user_segment", "user_version", "first_of_type", "enriched_by"), {"ignoreNullFields": "false"})
    source = F.when(F.col("source_kind") == SESSION_START, SESSIONS_TOPIC).otherwise(TRANSACTIONS_TOPIC)
    event = F.to_json(F.struct("tx_id", "session_id", "user_id", "amount", "currency", "type", "country", "device",
                               F.timestamp_micros("t_us").alias("event_time")))
    letter = F.to_json(F.struct(F.lit("money-enrichment").alias("job"), "reason", source.alias("source_topic"),
                                F.col("src_partition").alias("source_partition"),
                                F.col("src_offset").alias("source_offset"), F.col("entity_id").alias("key"),
                                event.alias("value")))
    is_enriched = F.col("kind") == ENRICHED
    return flows.where(F.col("kind").isin(ENRICHED, DEAD)).select(
        F.when(is_enriched, ENRICHED_TOPIC).otherwise(DEAD_LETTERS_TOPIC).alias("topic"),
        F.when(is_enriched, F.col("tx_id")).otherwise(F.col("entity_id")).alias("key"),
        F.when(is_enriched, enriched).otherwise(letter).alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Kafka records in (the connector's columns), Kafka records (topic, key, value) out. Settings
    come from the environment here (rules.py, and the lookup client's LAB_LOOKUP_*)."""
    parsed = parse_events(raw, SCHEMAS, DEAD_LETTERS_TOPIC, job="money-enrichment")
    # The query's first shuffle, by stage 1's key, shared by the events and the dead letters: Kafka is
    # read once. Each stage still groups anew (the watermark operator does not pass its partitioning on).
    by_entity = parsed.shuffle(route_columns(ROUTES, KEY, "string"))
    config, processors = settings(), solutions.of(SOLUTION, PROCESSORS, solution)
    users = users_snapshot(raw.sparkSession, config.users_snapshot) if config.users_snapshot else None
    # Each stage emits a row keyed by the (entity, entity_id) of the stage it goes to next (given.py's
    # `flow`), and each groups by that key. Stage 1's rows' emitted_at (the watermark they were
    # emitted at, + 1 ms) is stage 2's event time.
    joined = (stage_rows(by_entity.events, config)  # by session: dedup, the wait for the session; on by user
              .groupBy("entity", "entity_id")
              .transformWithState(processors.SessionJoin(config), FLOW, "Append", "EventTime",
                                  eventTimeColumnName="emitted_at"))
    with_users = (joined  # by user: the user as of the transaction's time, first of type (no
                  .groupBy("entity", "entity_id")  # stateful operator after it reads its rows' time)
                  .transformWithState(UserEnrich(config), FLOW, "Append", "EventTime",
                                      initialState=users.groupBy(*KEY) if users is not None else None))
    # What came after its session left state is enriched by asking the lookup service (lookup.py).
    decided = with_users.mapInArrow(lookup_step(LookupSettings.from_env()), FLOW)
    return output_records(decided).unionByName(by_entity.dead_letters)


def query(spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
    """The job: its topics read, `build`, the rows written to the topics they name."""
    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    out = build(kafka.incoming(raw), solution)
    return kafka.outgoing(out).writeStream.format("kafka").options(**kafka.sink()).outputMode("append")
