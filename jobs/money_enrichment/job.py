"""Money enrichment: transactions joined to their session and to their user as of the
transaction's time, deduplicated, first-of-type flagged; late ones enriched by a lookup service.

A record's trip, top down: the topics and their schemas; how stage 1 keys them (ROUTES); the two
stages, by session (SessionJoin, from a solution module: jobs/money_enrichment/solution.py or a
candidate's exercises/money_enrichment.py) then by user (UserEnrich, given), and the lookup step
(`enrich`); what goes to the output topic; then `build`, which parses each record
(joinlab.events), shuffles the events by stage 1's key, and wires it all to Kafka rows. Below it:
the output as a consumer reads it, and the stages in memory. The row contract and stage 2 are
given.py.
"""
from __future__ import annotations

import json
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.money_enrichment.given import (DEAD, ENRICHED, EVENT_COLUMNS, FLOW, KEY, SESSION, SESSION_START, TX, USER,
                                         USER_UPDATE, UserEnrich)
from jobs.money_enrichment.lookup import enrich_rows, lookup_step
from jobs.money_enrichment.rules import TYPES, Settings, settings
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events, validate)
from joinlab.in_memory import Chain
from joinlab.lookup import LookupResult, LookupSettings
from joinlab.patterns import Interview, Lookup
from joinlab.stages import Stage, chain, processors

# --- What it reads ------------------------------------------------------------------------------

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

# --- How it keys, and its stages ----------------------------------------------------------------

# Stage 1's keys (KEY, given.py): transactions and sessions by session, users by user (as a string).
ROUTES = [Route(TRANSACTIONS, SESSION, "session_id"), Route(SESSIONS, SESSION, "session_id"),
          Route(USERS, USER, "user_id")]
KINDS = {TRANSACTIONS_TOPIC: TX, SESSIONS_TOPIC: SESSION_START, USERS_TOPIC: USER_UPDATE}  # a row's kind, by topic
# A stage re-keys a row by the (entity, key) it emits it with (given.py's `flow`): stage 2 groups
# anew, a shuffle where joinlab.stages.chain groups it.
STAGES = [
    # by session: dedup, the wait for the session; a joined transaction goes on keyed by its user
    Stage("join", "jobs.money_enrichment.solution.SessionJoin", KEY, FLOW, event_time=True, out_time=True,
          make=lambda c: (c,)),
    # by user: the user as of the transaction's time, first of type
    Stage("enrich", UserEnrich, KEY, FLOW, event_time=True, initial=True, make=lambda c: (c,))]


def keyed(events: DataFrame, config: Settings) -> DataFrame:
    """Valid events (parse_events' frame) as stage 1's input rows, keyed by session or user.

    Spark drops rows behind the watermark before a transformWithState sees them, without a word.
    The stages get the event time as plain microseconds (t_us carries no watermark metadata), so a
    late transaction reaches them and is looked up; the watermark still advances."""
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


def enrich(events: DataFrame, config: Settings, lookup: LookupSettings, users: DataFrame | None = None,
           solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: valid events in, FLOW rows of kind "enriched" or "dead" out.
    `users`: initial state for stage 2 (rows of `users_snapshot`), or None."""
    enriched = chain(keyed(events, config), STAGES, solution, config, users)
    return enriched.mapInArrow(lookup_step(lookup), FLOW)


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


# --- What it writes -----------------------------------------------------------------------------

def to_kafka_rows(flows: DataFrame) -> DataFrame:
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
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: enriched transactions and dead
    letters. Settings come from the environment here (jobs/money_enrichment/rules.py, and the
    lookup client's LAB_LOOKUP_*), read once on the driver."""
    parsed = parse_events(raw, SCHEMAS, DEAD_LETTERS_TOPIC, job="money-enrichment")
    # One shuffle by stage 1's key, shared by the events and the dead letters: Kafka is read once. Each
    # stage still groups anew (Spark's watermark operator does not pass its input's partitioning on).
    by_entity = parsed.repartition(route_columns(ROUTES, KEY, "string"))
    config = settings()
    users = users_snapshot(raw.sparkSession, config.users_snapshot) if config.users_snapshot else None
    flows = enrich(by_entity.events, config, LookupSettings.from_env(), users, solution)
    return to_kafka_rows(flows).unionByName(by_entity.dead_letters)


# --- The rest of the pattern's parts (joinlab.patterns.Job) -------------------------------------

SOLUTION, PROCESSORS = "jobs.money_enrichment.solution", processors(STAGES)
# Avro-encoded state: a field added to a stored value (the user) is read as NULL from old entries
# on restart; Spark's default encoding refuses the changed schema (jobs/money_enrichment/README.md).
# Fixed when a checkpoint is created; joinlab.job.start applies it.
SPARK_CONF = {"spark.sql.streaming.stateStore.encodingFormat": "avro"}
SETTINGS = ("MONEY_WATERMARK_DELAY", "MONEY_SESSION_DURATION", "MONEY_WAIT_LIMIT", "MONEY_DEDUP_HORIZON",
            "MONEY_USERS_SNAPSHOT")
INTERVIEW = Interview(level="4, the hard one", time_box="90 min", key="transaction")
LOOKUP = Lookup(SESSIONS, "session_id")  # what arrives after its session left state is enriched by asking


# --- Reading the output topic: what a consumer keeps -------------------------------------------

def parse_output(value: bytes) -> dict:
    body = json.loads(value)
    return dict(body, amount=float(body["amount"]), event_time=parse_time(body["event_time"]),
                session_started_at=parse_time(body["session_started_at"]))


def actual(records: list) -> dict[str, dict]:
    """tx_id -> its last record on the output topic (the changelog's current value), without
    `enriched_by`. A key lives in one partition, so the last one read is the last one written."""
    views = [parse_output(r.value) for r in records if r.topic == ENRICHED_TOPIC]
    return {v["tx_id"]: {name: value for name, value in v.items() if name != "enriched_by"} for v in views}


def version(view: dict) -> tuple:
    """A transaction's record is corrected in place (same key): no version order to compare."""
    return ()


# --- The stages in memory -----------------------------------------------------------------------

class InMemory(Chain):
    """STAGES, then the lookup step, through pyspark's TwsTester, one micro-batch at a time: no
    Spark session. The lookup service knows `sessions` (session_id -> SessionStarted event as on
    the topic); by default, as the real service reading the sessions topic, every session of the
    batches so far. `users`: stage 2's initial state (rows of `users_snapshot`)."""

    def __init__(self, solution: ModuleType | None = None, config: Settings | None = None,
                 sessions: dict | None = None, users: list[Row] = ()):
        self.config = config or settings()
        super().__init__(STAGES, solution, self.config, self.config.watermark_delay_ms, users)
        self.sessions, self.reads_topic = sessions if sessions is not None else {}, sessions is None
        self.lookups = []

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid events as stage 1's rows."""
        out = []
        for record in records:
            for schema, e in valid_events([record], SCHEMAS):
                fields = routed(ROUTES, schema, e, EVENT_COLUMNS, KEY, "string")
                fields.update(kind=KINDS[schema.topic], t_us=micros(e["event_time"]),
                              src_partition=getattr(record, "partition", None),
                              src_offset=getattr(record, "offset", None))
                out.append(Row(**fields))
        return out

    def _lookup(self, ids):
        self.lookups += ids
        known = self.sessions
        return {i: LookupResult(known.get(i), None if i in known else "session not found (HTTP 404)", 1) for i in ids}

    def _read_sessions(self, rows: list[Row]) -> None:
        """What the lookup service has read off the sessions topic by this batch (first one wins)."""
        for r in rows:
            if r.kind == SESSION_START:
                self.sessions.setdefault(r.session_id, {"session_id": r.session_id, "user_id": r.user_id,
                                                        "country": r.country, "device": r.device,
                                                        "event_time": moment(r.t_us).isoformat()})

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[dict]:
        """One micro-batch: FLOW rows (as dicts) of kind "enriched" or "dead", after the lookup step."""
        if self.reads_topic:
            self._read_sessions(rows)
        return enrich_rows([r.asDict() for r in super().batch(rows, watermark)], self._lookup)

    @staticmethod
    def dead_letters(out: list[dict]) -> dict:
        """tx_id (or session_id) -> the reason of its last dead letter."""
        return {r["entity_id"]: r["reason"] for r in out if r["kind"] == DEAD}

    @staticmethod
    def views(out: list[dict]) -> dict:
        """tx_id -> its last enriched record as `actual` reads it."""
        shown = ("tx_id", "user_id", "session_id", "currency", "type", "session_country", "session_device",
                 "user_name", "user_country", "user_segment", "user_version", "first_of_type")
        return {r["tx_id"]: {**{name: r[name] for name in shown}, "amount": float(r["amount"]),
                             "event_time": moment(r["t_us"]), "session_started_at": moment(r["session_start_us"])}
                for r in out if r["kind"] == ENRICHED}
