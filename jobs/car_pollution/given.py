"""Car pollution's row contract: what each stage gets and emits, and stage 1's row maker."""
from __future__ import annotations

from pyspark.sql import Row

ADD, DEL, READING = "ADD", "DEL", "READING"

# Stage 1's input: one valid event of either topic (the other topic's fields None).
EVENT_COLUMNS = ["entity", "entity_id", "car_id", "plate", "to_zone_id", "fuel_level", "zone_id",
                 "pollution_level", "seq", "event_time"]

# Stage 1 -> stage 2: one row shape for a car's ADD/DEL and a zone's reading, keyed by zone.
OP = ("zone_id bigint, op string, car_id bigint, car_seq bigint, plate string, fuel_level double, "
      "car_time timestamp, reading_seq bigint, pollution_level double, reading_time timestamp")
# Stage 2 -> output: a car's view (op ADD) or its retraction from a zone it left (op DEL).
VIEW = ("op string, car_id bigint, car_seq bigint, plate string, zone_id bigint, fuel_level double, "
        "car_time timestamp, reading_seq bigint, pollution_level double, reading_time timestamp")


def op_row(op: str, zone_id: int, row=None, **fields) -> Row:
    """Stage 1's output row: an ADD/DEL of a car (its fields from an arrival `row`) or a READING."""
    values = dict.fromkeys(("car_id", "car_seq", "plate", "fuel_level", "car_time", "reading_seq",
                            "pollution_level", "reading_time"))
    if row is not None:
        values.update(car_id=row.car_id, car_seq=row.seq, plate=row.plate, fuel_level=row.fuel_level,
                      car_time=row.event_time)
    values.update(fields)
    return Row(zone_id=zone_id, op=op, **values)
