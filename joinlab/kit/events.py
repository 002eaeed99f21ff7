"""Event contracts and parsing: every record becomes a typed row or a dead letter with a reason.

Why this shape: a job must keep running on bad input and lose nothing. Parsing is plain Spark SQL
on the VARIANT type (no Python UDF), with strict JSON types, so the plain-Python references
(`validate`) apply the very same rules and the two never disagree on what is valid.

The watermark guard: an event whose `event_time` lies more than $LAB_MAX_EVENT_SKEW (default an
hour) past the moment its record was produced is dead-lettered, so it never reaches a watermark.
One such event would move the watermark past every real event, and from then on every valid
event is late. The bound is the record's Kafka timestamp, not the clock of the machine that
checks: the job and a reference run an hour later must judge a record alike, and so must a
replay after a restart. Old data (a backfill) is never in the future of its own records, so it
passes unchanged. A producer that stamps its records with their event time (CreateTime set by
hand) bypasses the guard; the lab's producers let the client stamp the time of sending.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from joinlab.config import duration_ms, max_event_skew

# Spark type of a field -> the JSON type(s) `schema_of_variant` must report for it.
_JSON_TYPES = {"bigint": ("BIGINT",), "string": ("STRING",), "timestamp": ("STRING",),
               "double": ("BIGINT", "DOUBLE", "DECIMAL"), "boolean": ("BOOLEAN",)}


@dataclass(frozen=True)
class Check:
    """A rule beyond types: `sql` for Spark, `holds` for plain Python, one `reason` for both."""
    sql: str
    holds: Callable[[dict], bool]
    reason: str


@dataclass(frozen=True)
class EventSchema:
    """One input topic's contract: its JSON fields with Spark types; all are required unless optional."""
    topic: str
    fields: dict[str, str]
    optional: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()

    def ddl(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.fields.items())


@dataclass(frozen=True)
class Route:
    """How a stage keys one kind of event: events of `schema`'s topic (with `when`, only those it
    holds for) are about `entity` (a car, a zone, a lottery), identified by their field `by`. A
    pattern's list of routes is its keying, read by its Spark job (`route_columns`) and by its
    in-memory pipeline (`routed`), so the two never key an event differently."""
    schema: EventSchema
    entity: str
    by: str
    when: Check | None = None


def route_columns(routes: list[Route], key: tuple[str, str], id_type: str | None = None) -> dict[str, Column]:
    """The key as Spark columns of parse_events' frame, named `key` (entity, id): the first route that matches wins."""
    entity = entity_id = None
    for r in routes:
        matches = F.col("topic") == r.schema.topic
        if r.when is not None:
            matches = matches & F.expr(r.when.sql)
        by = F.col(r.by).cast(id_type) if id_type else F.col(r.by)
        entity = F.when(matches, r.entity) if entity is None else entity.when(matches, r.entity)
        entity_id = F.when(matches, by) if entity_id is None else entity_id.when(matches, by)
    return {key[0]: entity, key[1]: entity_id}


def routed(routes: list[Route], schema: EventSchema, event: dict, columns: list[str], key: tuple[str, str],
           id_type: str | None = None) -> dict:
    """One valid event as a first stage's row: its `columns` (None where it has no such field), with
    the key (entity, id) named `key`, as `route_columns` keys it."""
    for r in routes:
        if r.schema.topic == schema.topic and (r.when is None or r.when.holds(event)):
            fields = {name: event.get(name) for name in columns}
            fields[key[0]], fields[key[1]] = r.entity, str(event[r.by]) if id_type == "string" else event[r.by]
            return fields
    raise ValueError(f"no route for an event of {schema.topic}")


# --- The reasons, shared by Spark parsing and the plain-Python validator --------------------

EMPTY, MALFORMED, NOT_OBJECT, UNEXPECTED_TOPIC = ("empty value", "malformed JSON", "not a JSON object",
                                                  "unexpected topic")
EVENT_TIME = "event_time"  # the field a schema's watermark guard applies to, where it has one


def missing(name: str) -> str:
    return f"missing field: {name}"


def invalid(name: str, kind: str) -> str:
    return f"invalid field: {name} (expected {kind})"


@dataclass(frozen=True)
class Skew:
    """The watermark guard's bound, read once from $LAB_MAX_EVENT_SKEW."""
    text: str
    ms: int

    @classmethod
    def configured(cls) -> "Skew":
        text = max_event_skew()
        return cls(text, duration_ms(text, "LAB_MAX_EVENT_SKEW"))

    @property
    def reason(self) -> str:
        return f"invalid field: {EVENT_TIME} (more than {self.text} after the record was produced; LAB_MAX_EVENT_SKEW)"

    def allows(self, event_time_us: int, produced_ms: int) -> bool:
        """A record without a timestamp (-1) passes: there is no bound to hold it to."""
        return produced_ms < 0 or event_time_us <= (produced_ms + self.ms) * 1000


# --- Spark ----------------------------------------------------------------------------------

def _reason(schema: EventSchema, skew: Skew) -> Column:
    """The first rule the record breaks, or NULL when it is valid. Typed fields are columns here, and
    so is each field's JSON type (`_json_type`), worked out once per record for every rule that asks."""
    rules: list[tuple[Column, str]] = [(F.col("_value").isNull() | (F.length("_value") == 0), EMPTY),
                                       (F.col("_v").isNull(), MALFORMED),
                                       # valid JSON whose first character is "{" is an object
                                       (F.expr(r"left(trim(LEADING ' \t\n\r' FROM _value), 1) != '{'"), NOT_OBJECT)]
    for name, kind in schema.fields.items():
        json_type = F.col(_json_type(name))
        is_missing = json_type.isNull() | (json_type == "VOID")
        if name not in schema.optional:
            rules.append((is_missing, missing(name)))
        wrong = ~json_type.isin(*_JSON_TYPES[kind]) | F.col(name).isNull()
        rules.append((~is_missing & wrong, invalid(name, kind)))
    for check in schema.checks:
        rules.append((~F.coalesce(F.expr(check.sql), F.lit(False)), check.reason))
    if EVENT_TIME in schema.fields:
        too_late = F.unix_micros(F.col(EVENT_TIME)) > (F.unix_millis(F.col("_produced")) + F.lit(skew.ms)) * 1000
        rules.append((F.coalesce(too_late, F.lit(False)), skew.reason))
    return F.coalesce(*[F.when(condition, F.lit(reason)) for condition, reason in rules])


def _json_type(name: str) -> str:
    """The column holding field `name`'s JSON type as `schema_of_variant` names it, without its
    precision ("DECIMAL(3,1)" -> "DECIMAL"); NULL when the field is absent."""
    return f"_json_type_{name}"


def _field_types(schemas: list[EventSchema]) -> dict[str, str]:
    types: dict[str, str] = {}
    for schema in schemas:
        for name, kind in schema.fields.items():
            if types.setdefault(name, kind) != kind:
                raise ValueError(f"field {name!r} is {types[name]} in one topic and {kind} in {schema.topic}")
    return types


_LETTER_COLUMNS = ["_key", "_value", "_raw", "_reason"]


@dataclass(frozen=True)
class Parsed:
    """Every record of a micro-batch, checked: a valid event, or a dead letter with its reason."""
    checked: DataFrame        # one row per record: the union of fields, source_partition/offset, _reason
    columns: list[str]        # an event's columns: topic, the union of fields, source_partition/offset
    dead_letter_topic: str
    job: str
    key: tuple[str, ...] = ()  # the columns it is partitioned by (`shuffle`)

    def shuffle(self, key: dict[str, Column]) -> Parsed:
        """The records hash-partitioned by `key` (name -> expression over an event's columns), which
        every event then carries: the query's first shuffle, where its first stage groups by those
        columns, so that the stage adds no shuffle of its own.

        Why here, before the split into events and dead letters: a streaming plan reads its source
        once for every branch that uses it, and those are two branches. Both read this one shuffle,
        so Kafka is read and each record parsed once per micro-batch. One struct crosses it, unpacked
        by a generator on the other side: each branch then needs all of it, so Spark cannot trim the
        two reads apart and plans the second as a reuse of the first. A record's raw bytes cross
        the shuffle only when it is a dead letter."""
        columns = [c for c in self.columns if c not in key]
        is_letter = F.col("_reason").isNotNull()
        row = F.struct(*columns, *[F.when(is_letter, F.col(c)).alias(c) for c in _LETTER_COLUMNS])
        shuffled = (self.checked.select(*[column.alias(name) for name, column in key.items()], row.alias("_row"))
                    .repartition(*key).select(*key, F.explode(F.array("_row")).alias("_row")).select(*key, "_row.*"))
        return Parsed(shuffled, columns, self.dead_letter_topic, self.job, tuple(key))

    @property
    def events(self) -> DataFrame:
        """The valid events: `key`, then `columns`."""
        return self.checked.where(F.col("_reason").isNull()).select(*self.key, *self.columns)

    @property
    def dead_letters(self) -> DataFrame:
        """Kafka-sink rows (topic, key, value) for the dead-letter topic: the record and its reason."""
        letter = F.to_json(F.struct(F.lit(self.job).alias("job"), F.col("_reason").alias("reason"),
                                    F.col("topic").alias("source_topic"), "source_partition", "source_offset",
                                    F.col("_key").cast("string").alias("key"),
                                    F.col("_value").alias("value"), F.base64("_raw").alias("value_base64")))
        return self.checked.where(F.col("_reason").isNotNull()).select(
            F.lit(self.dead_letter_topic).alias("topic"), F.col("_key").cast("string").alias("key"),
            letter.alias("value"))


def parse_events(raw: DataFrame, schemas: list[EventSchema], dead_letter_topic: str, job: str) -> Parsed:
    """Raw Kafka rows (the connector's columns), each checked against its topic's schema: `events`
    and `dead_letters` of the result split them. Without `shuffle` (a batch frame, a test),
    each of the two reads `raw` itself."""
    types = _field_types(schemas)
    skew = Skew.configured()
    fields = [F.expr(f"try_variant_get(_v, '$.{name}', 'variant')").alias(f"_json_{name}") for name in types]
    typed = [F.when(F.col("topic").isin(*[s.topic for s in schemas if name in s.fields]),
                    F.expr(f"try_variant_get(_json_{name}, '$', '{kind}')")).alias(name)
             for name, kind in types.items()]
    json_types = [F.split(F.expr(f"schema_of_variant(_json_{name})"), r"\(")[0].alias(_json_type(name))
                  for name in types]
    reason = F.lit(UNEXPECTED_TOPIC)
    for schema in reversed(schemas):
        reason = F.when(F.col("topic") == schema.topic, _reason(schema, skew)).otherwise(reason)
    checked = (raw.select(F.col("key").alias("_key"), F.col("value").cast("string").alias("_value"),
                          F.col("value").alias("_raw"), "topic", F.col("partition").alias("source_partition"),
                          F.col("offset").alias("source_offset"), F.col("timestamp").alias("_produced"),
                          # explode(array(x)) is one row per record, but a barrier: without it Spark
                          # pushes the validity filter below the parse and parses each record once per rule
                          F.explode(F.array(F.expr("try_parse_json(CAST(value AS STRING))"))).alias("_v"))
               .select("*", *fields).select("*", *typed, *json_types).withColumn("_reason", reason))
    return Parsed(checked, ["topic", *types, "source_partition", "source_offset"], dead_letter_topic, job)


# --- Plain Python: the same rules, for batch references and generators ------------------------

def _json_kind_ok(value, kind: str) -> bool:
    if kind == "bigint":
        return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63
    if kind == "double":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "timestamp":
        return isinstance(value, str) and parse_time(value) is not None
    return isinstance(value, str)


def parse_time(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def micros(value: str | datetime) -> int:
    """Microseconds since the epoch of an ISO time (as events carry it) or a datetime."""
    moment_ = parse_time(value) if isinstance(value, str) else value
    return (moment_ - EPOCH) // timedelta(microseconds=1)


def moment(t_us: int) -> datetime:
    return EPOCH + timedelta(microseconds=t_us)


def timer_ms(t_us: int) -> int:
    """The first watermark (ms) at or past an event time (us): when an event can be decided."""
    return -(-t_us // 1000)


def validate(schema: EventSchema, value: bytes | None, produced_ms: int | None = None,
             skew: Skew | None = None) -> tuple[dict | None, str | None]:
    """(the event as a dict, None) when valid, else (None, reason) - as `parse_events` decides.
    `produced_ms` is the record's Kafka timestamp (None: unknown, so no watermark guard)."""
    if not value:
        return None, EMPTY
    try:
        event = json.loads(value.decode("utf-8", errors="replace"))
    except ValueError:
        return None, MALFORMED
    if not isinstance(event, dict):
        return None, NOT_OBJECT
    for name, kind in schema.fields.items():
        present = event.get(name) is not None
        if not present and name not in schema.optional:
            return None, missing(name)
        if present and not _json_kind_ok(event[name], kind):
            return None, invalid(name, kind)
    for check in schema.checks:
        if not check.holds(event):
            return None, check.reason
    if EVENT_TIME in schema.fields and produced_ms is not None:
        skew = skew or Skew.configured()
        if not skew.allows(micros(event[EVENT_TIME]), produced_ms):
            return None, skew.reason
    return event, None


def valid_events(records, schemas: list[EventSchema]):
    """(schema, event) for every record of a schema's topic that `validate` accepts, in order."""
    by_topic = {schema.topic: schema for schema in schemas}
    skew = Skew.configured()
    for record in records:
        schema = by_topic.get(record.topic)
        event = validate(schema, record.value, produced_at(record), skew)[0] if schema else None
        if event is not None:
            yield schema, event


def produced_at(record) -> int | None:
    """A record's Kafka timestamp where it has one (read back from a topic), else None (a
    generator's record, not produced yet)."""
    return getattr(record, "timestamp_ms", None)
