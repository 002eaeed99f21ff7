"""The right answer for car pollution, in plain Python from the input topics: every car's latest
arrival (highest seq) in its zone, with that zone's latest reading, or no pollution when the
zone never reported (a left join). Equal seqs are duplicates, so the first one read is kept.

The output topic is a changelog keyed by car: ADD views and DEL retractions. Its last record
per car is the one with the highest (car_seq, op, reading_seq), DEL ranking above the ADD it
retracts; that record must be the reference's ADD view.
"""
from __future__ import annotations

import json

from joinlab.events import latest_events, parse_time
from joinlab.topics import Record
from jobs.car_pollution import ADD, ARRIVALS, DEL, OUTPUT_TOPIC, READINGS


def latest(records: list[Record]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(latest arrival per car, latest reading per zone); invalid records are skipped."""
    tables = latest_events(records, [(ARRIVALS, "car_id"), (READINGS, "zone_id")], "seq")
    return tables[ARRIVALS.topic], tables[READINGS.topic]


def view(op: str, car_id: int, car_seq: int, plate: str, zone_id: int, fuel_level: float, car_time,
         reading: dict | None) -> dict:
    """One view, flat, with times as datetimes so that formatting never counts as a difference."""
    return {"op": op, "car_id": car_id, "car_seq": car_seq, "plate": plate, "zone_id": zone_id,
            "fuel_level": float(fuel_level), "car_time": _time(car_time),
            "reading_seq": reading["seq"] if reading else None,
            "pollution_level": float(reading["pollution_level"]) if reading else None,
            "reading_time": _time(reading["event_time"]) if reading else None}


def expected(records: list[Record]) -> dict[int, dict]:
    cars, zones = latest(records)
    return {car_id: view(ADD, car_id, car["seq"], car["plate"], car["to_zone_id"], car["fuel_level"],
                         car["event_time"], zones.get(car["to_zone_id"]))
            for car_id, car in cars.items()}


def parse_output(value: bytes) -> dict:
    body = json.loads(value)
    reading = None if body["reading_seq"] is None else {
        "seq": body["reading_seq"], "pollution_level": body["pollution_level"], "event_time": body["reading_time"]}
    return view(body["op"], body["car_id"], body["car_seq"], body["plate"], body["zone_id"], body["fuel_level"],
                body["car_time"], reading)


def actual(records: list[Record]) -> dict[int, dict]:
    """The last record of each car on the output topic, by version (not by arrival)."""
    views: dict[int, dict] = {}
    for record in records:
        if record.topic != OUTPUT_TOPIC:
            continue
        candidate = parse_output(record.value)
        current = views.get(candidate["car_id"])
        if current is None or version(candidate) > version(current):
            views[candidate["car_id"]] = candidate
    return views


def version(v: dict) -> tuple[int, int, int]:
    return v["car_seq"], 1 if v["op"] == DEL else 0, v["reading_seq"] or 0


def _time(value):
    return parse_time(value) if isinstance(value, str) else value
