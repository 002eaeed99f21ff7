"""Car pollution's output as a consumer reads it: a changelog keyed by car, whose last record per
car is the one with the highest (car_seq, op, reading_seq), DEL ranking above the ADD it retracts.
The verifier, the grader and the tests compare this with the batch reference (references/car_pollution.py)."""
from __future__ import annotations

import json

from jobs.car_pollution.given import DEL
from jobs.car_pollution.job import OUTPUT_TOPIC
from joinlab.kit.events import parse_time
from joinlab.kit.in_memory import last_by_version


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
