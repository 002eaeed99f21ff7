"""Car pollution: a one-to-many join (many cars in one zone) that stays right while cars move.

A record's trip, top down: the topics and their schemas; how stage 1 keys them (ROUTES: a car's
arrivals by car, a zone's readings by zone); the two stages, by car then by zone; what goes to the
output topic; then `build`, which parses each record (joinlab.events), shuffles the events by stage
1's key, runs them through both stages and writes views and dead letters. Below it: the output as
a consumer reads it, and the stages in memory. The row contract is given.py.
"""
from __future__ import annotations

import json
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.car_pollution.given import ADD, DEL, EVENT_COLUMNS, OP, READING, VIEW, op_row  # noqa: F401 (the contract)
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import Chain, last_by_version
from joinlab.patterns import Interview
from joinlab.stages import Stage, chain, processors

# --- What it reads ------------------------------------------------------------------------------

ARRIVALS_TOPIC, READINGS_TOPIC = "car-arrivals", "zone-readings"
OUTPUT_TOPIC, DEAD_LETTERS_TOPIC = "car-pollution", "car-pollution-dlq"
INPUT_TOPICS = [ARRIVALS_TOPIC, READINGS_TOPIC]
OUTPUT_TOPICS = [OUTPUT_TOPIC, DEAD_LETTERS_TOPIC]

_SEQ = Check("seq >= 1", lambda e: e["seq"] >= 1, "invalid field: seq (must be >= 1)")
ARRIVALS = EventSchema(ARRIVALS_TOPIC, {"car_id": "bigint", "plate": "string", "to_zone_id": "bigint",
                                        "fuel_level": "double", "seq": "bigint", "event_time": "timestamp"},
                       checks=(_SEQ,))
READINGS = EventSchema(READINGS_TOPIC, {"zone_id": "bigint", "pollution_level": "double", "seq": "bigint",
                                        "event_time": "timestamp"}, checks=(_SEQ,))

# --- How it keys, and its stages ----------------------------------------------------------------

KEY = ("entity", "entity_id")  # stage 1's key: a car's arrivals by car, a zone's readings by zone
ROUTES = [Route(ARRIVALS, "car", "car_id"), Route(READINGS, "zone", "zone_id")]
# Stage 2 groups by zone: the query's second shuffle, where joinlab.stages.chain groups it.
STAGES = [Stage("moves", "jobs.car_pollution.solution.CarMovesProcessor", KEY, OP),  # ADD/DEL, readings, by zone
          Stage("zones", "jobs.car_pollution.solution.ZoneCarsProcessor", ("zone_id",), VIEW)]  # cars in a zone


def join_cars_to_zones(events: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: car moves keyed by car, then cars and readings keyed by zone,
    through the two processors (the lab's, or `solution`'s). `events` come partitioned by stage
    1's key (`build`)."""
    return chain(events.select(*EVENT_COLUMNS), STAGES, solution)


# --- What it writes -----------------------------------------------------------------------------

def to_kafka_rows(views: DataFrame) -> DataFrame:
    """Views (VIEW's columns) as the output topic's records, keyed by car."""
    value = F.to_json(F.struct(*views.columns), {"ignoreNullFields": "false"})
    return views.select(F.lit(OUTPUT_TOPIC).alias("topic"), F.col("car_id").cast("string").alias("key"),
                        value.alias("value"))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: car views and dead letters."""
    parsed = parse_events(raw, [ARRIVALS, READINGS], DEAD_LETTERS_TOPIC, job="car-pollution")
    by_entity = parsed.repartition(route_columns(ROUTES, KEY))  # the query's first shuffle, to stage 1
    return to_kafka_rows(join_cars_to_zones(by_entity.events, solution)).unionByName(by_entity.dead_letters)


# --- The rest of the pattern's parts (joinlab.patterns.Job) -------------------------------------

SOLUTION, PROCESSORS = "jobs.car_pollution.solution", processors(STAGES)
SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="2, one-to-many", time_box="45-60 min", key="car")


# --- Reading the output topic: what a consumer keeps ------------------------------------------
# A changelog keyed by car: its last record per car is the one with the highest
# (car_seq, op, reading_seq), DEL ranking above the ADD it retracts.

def _time(value):
    return parse_time(value) if isinstance(value, str) else value


def view(v: dict) -> dict:
    """One view (VIEW's fields), with times as datetimes so that formatting never counts as a difference."""
    level = v["pollution_level"]
    return dict(v, fuel_level=float(v["fuel_level"]), car_time=_time(v["car_time"]),
                pollution_level=None if level is None else float(level),
                reading_time=_time(v["reading_time"]))


def parse_output(value: bytes) -> dict:
    return view(json.loads(value))


def version(v: dict) -> tuple[int, int, int]:
    return v["car_seq"], 1 if v["op"] == DEL else 0, v["reading_seq"] or 0


def actual(records: list) -> dict[int, dict]:
    """The last record of each car on the output topic, by version (not by arrival)."""
    return last_by_version([parse_output(r.value) for r in records if r.topic == OUTPUT_TOPIC], "car_id", version)


# --- The stages in memory ---------------------------------------------------------------------

def event_row(schema: EventSchema, event: dict) -> Row:
    """One valid event as stage 1 gets it, keyed by ROUTES."""
    fields = routed(ROUTES, schema, event, EVENT_COLUMNS, KEY)
    return Row(**dict(fields, event_time=moment(micros(event["event_time"]))))


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solution)

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as stage 1's rows."""
        return [event_row(schema, e) for schema, e in valid_events(records, [ARRIVALS, READINGS])]

    @staticmethod
    def views(out: list[Row]) -> dict:
        return last_by_version([view(r.asDict()) for r in out], "car_id", version)
