"""Ad clicks' output as a consumer reads it, keyed by impression: one record when it is clicked,
or one with a null click when it never is. The verifier, the grader and the tests compare this
with the batch reference (references/ad_clicks.py)."""
from __future__ import annotations

import json

from jobs.ad_clicks.job import OUTPUT_TOPIC
from joinlab.kit.events import EPOCH, parse_time
from joinlab.kit.in_memory import last_by_version


def view(v: dict) -> dict:
    """One view (VIEW's fields), with times as datetimes so that formatting never counts as a difference."""
    return dict(v, impression_time=parse_time(v["impression_time"]),
                click_time=None if v["click_time"] is None else parse_time(v["click_time"]))


def version(v: dict) -> tuple:
    """A click over none, and of two clicks on one impression the later one."""
    return v["click_id"] is not None, v["click_time"] or EPOCH, v["click_id"] or 0


def actual(records: list) -> dict[int, dict]:
    """The last record of each impression on the output topic, by version."""
    return last_by_version([view(json.loads(r.value)) for r in records if r.topic == OUTPUT_TOPIC],
                           "impression_id", version)
