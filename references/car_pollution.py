"""The right answer for car pollution, in plain Python from the input topics: every car's latest
arrival (highest seq) in its zone, with that zone's latest reading, or no pollution when the
zone never reported (a left join). Equal seqs are duplicates, so the first one read is kept.

The output topic is a changelog keyed by car: ADD views and DEL retractions. Its last record
per car is the one with the highest (car_seq, op, reading_seq), DEL ranking above the ADD it
retracts; that record must be the reference's ADD view.
"""
from __future__ import annotations

from references import latest_events
from joinlab.topics import Consumed
from jobs.car_pollution.given import ADD
from jobs.car_pollution.job import ARRIVALS, READINGS
from jobs.car_pollution.consumer import actual, parse_output, version, view  # noqa: F401 (output contract)


def latest(records: list[Consumed]) -> tuple[dict[int, dict], dict[int, dict]]:
    """(latest arrival per car, latest reading per zone); invalid records are skipped."""
    tables = latest_events(records, [(ARRIVALS, "car_id"), (READINGS, "zone_id")], "seq")
    return tables[ARRIVALS.topic], tables[READINGS.topic]


def car_view(car: dict, zone_id: int, reading: dict | None) -> dict:
    """The ADD view of a car's arrival `car` in `zone_id`, with that zone's `reading` (or none)."""
    reading = reading or {}
    return view({"op": ADD, "car_id": car["car_id"], "car_seq": car["seq"], "plate": car["plate"],
                 "zone_id": zone_id, "fuel_level": car["fuel_level"], "car_time": car["event_time"],
                 "reading_seq": reading.get("seq"), "pollution_level": reading.get("pollution_level"),
                 "reading_time": reading.get("event_time")})


def expected(records: list[Consumed]) -> dict[int, dict]:
    cars, zones = latest(records)
    return {car_id: car_view(car, car["to_zone_id"], zones.get(car["to_zone_id"]))
            for car_id, car in cars.items()}


def final_watermark_ms(records: list) -> None:
    """None: the job has no event time; it has decided all it read."""
    return None


def notes(records: list) -> list[str]:
    return []
