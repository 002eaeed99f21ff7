"""Car pollution: a one-to-many join (many cars in one zone) that stays right while cars move.

The query first: stage 1 keyed by car (readings pass through it, keyed by zone: all events in one
frame, keyed by joinlab.events.parse_events), stage 2 keyed by zone, and the sink. Below it: the
topics and how records are parsed and keyed, the stages in memory, and how a consumer reads the
output. The row contract is given.py.
"""
from __future__ import annotations

import json
from datetime import datetime
from types import ModuleType

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.car_pollution.given import ADD, DEL, EVENT_COLUMNS, OP, READING, VIEW, op_row  # noqa: F401 (the contract)
from joinlab import solutions
from joinlab.events import (Check, EventSchema, Route, micros, moment, parse_events, parse_time, route_columns,
                            routed, valid_events)
from joinlab.in_memory import Chain, last_by_version
from joinlab.patterns import Interview
from joinlab.stages import Stage, chain, processors

STAGES = [Stage("moves", "CarMovesProcessor", ("entity", "entity_id"), OP),  # a car's ADD/DEL, readings, by zone
          Stage("zones", "ZoneCarsProcessor", ("zone_id",), VIEW)]          # each car in a zone, with its reading


def join_cars_to_zones(events: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """The core of the pattern: car moves keyed by car, then cars and readings keyed by zone,
    through the solution's two processors."""
    keyed = events.select(*EVENT_COLUMNS)  # entity, entity_id: keyed by parse_events
    return chain(keyed, STAGES, solutions.of(SOLUTION, PROCESSORS, solution))


def build(raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
    """Raw Kafka rows in, Kafka sink rows (topic, key, value) out: car views and dead letters."""
    parsed = parse_events(raw, [ARRIVALS, READINGS], DEAD_LETTERS_TOPIC, job="car-pollution",
                          key=dict(zip(("entity", "entity_id"), route_columns(ROUTES))))
    views = join_cars_to_zones(parsed.events, solution)
    value = F.to_json(F.struct(*views.columns), {"ignoreNullFields": "false"})  # VIEW's columns
    out = views.select(F.lit(OUTPUT_TOPIC).alias("topic"), F.col("car_id").cast("string").alias("key"),
                       value.alias("value"))
    return out.unionByName(parsed.dead_letters)


# --- The pattern's parts (joinlab.patterns.Job) ------------------------------------------------

ARRIVALS_TOPIC, READINGS_TOPIC = "car-arrivals", "zone-readings"
OUTPUT_TOPIC, DEAD_LETTERS_TOPIC = "car-pollution", "car-pollution-dlq"
INPUT_TOPICS = [ARRIVALS_TOPIC, READINGS_TOPIC]
OUTPUT_TOPICS = [OUTPUT_TOPIC, DEAD_LETTERS_TOPIC]
SOLUTION, PROCESSORS, GIVEN = "jobs.car_pollution.solution", processors(STAGES), None
SPARK_CONF, LOOKUP, SETTINGS = {}, None, ()
INTERVIEW = Interview(level="2, one-to-many", time_box="45-60 min", key="car")

_SEQ = Check("seq >= 1", lambda e: e["seq"] >= 1, "invalid field: seq (must be >= 1)")
ARRIVALS = EventSchema(ARRIVALS_TOPIC, {"car_id": "bigint", "plate": "string", "to_zone_id": "bigint",
                                        "fuel_level": "double", "seq": "bigint", "event_time": "timestamp"},
                       checks=(_SEQ,))
READINGS = EventSchema(READINGS_TOPIC, {"zone_id": "bigint", "pollution_level": "double", "seq": "bigint",
                                        "event_time": "timestamp"}, checks=(_SEQ,))

# Stage 1's keys: a car's arrivals by car, a zone's readings by zone.
ROUTES = [Route(ARRIVALS, "car", "car_id"), Route(READINGS, "zone", "zone_id")]


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solutions.of(SOLUTION, PROCESSORS, solution))

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as stage 1's rows."""
        return [event_row(schema, e) for schema, e in valid_events(records, [ARRIVALS, READINGS])]

    @staticmethod
    def views(out: list[Row]) -> dict:
        return last_by_version([view(r.asDict()) for r in out], "car_id", version)


def event_row(schema: EventSchema, event: dict) -> Row:
    """One valid event as stage 1 gets it, keyed by ROUTES."""
    fields = routed(ROUTES, schema, event, EVENT_COLUMNS)
    return Row(**dict(fields, event_time=moment(micros(event["event_time"]))))


def arrival_row(car: int, zone: int, seq: int, fuel: float, at: datetime, plate: str | None = None) -> Row:
    """A car's arrival as stage 1 gets it."""
    return event_row(ARRIVALS, {"car_id": car, "plate": plate or f"P-{car}", "to_zone_id": zone,
                                "fuel_level": fuel, "seq": seq, "event_time": at})


def reading_row(zone: int, seq: int, level: float, at: datetime) -> Row:
    """A zone's reading as stage 1 gets it."""
    return event_row(READINGS, {"zone_id": zone, "pollution_level": level, "seq": seq, "event_time": at})


# --- Reading the output topic: what a consumer keeps ------------------------------------------
# A changelog keyed by car: its last record per car is the one with the highest
# (car_seq, op, reading_seq), DEL ranking above the ADD it retracts.

def view(v: dict) -> dict:
    """One view (VIEW's fields), with times as datetimes so that formatting never counts as a difference."""
    level = v["pollution_level"]
    return dict(v, fuel_level=float(v["fuel_level"]), car_time=_time(v["car_time"]),
                pollution_level=None if level is None else float(level),
                reading_time=_time(v["reading_time"]))


def parse_output(value: bytes) -> dict:
    return view(json.loads(value))


def actual(records: list) -> dict[int, dict]:
    """The last record of each car on the output topic, by version (not by arrival)."""
    return last_by_version([parse_output(r.value) for r in records if r.topic == OUTPUT_TOPIC], "car_id", version)


def version(v: dict) -> tuple[int, int, int]:
    return v["car_seq"], 1 if v["op"] == DEL else 0, v["reading_seq"] or 0


def _time(value):
    return parse_time(value) if isinstance(value, str) else value
