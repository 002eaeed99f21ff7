"""The lottery's output as a consumer reads it: every winner and rejection, by key. Outcomes are
final, never updated. The verifier, the grader and the tests compare this with the batch
reference (references/lottery.py)."""
from __future__ import annotations

import json
from datetime import datetime

from jobs.lottery.job import REJECTIONS_TOPIC, WINNERS_TOPIC
from joinlab.kit.events import parse_time


def winner_key(lottery_id: int, start: datetime) -> str:
    return f"winner {lottery_id} {start.isoformat()}"


def parse_output(topic: str, value: bytes) -> tuple[str, dict]:
    body = json.loads(value)
    if topic == WINNERS_TOPIC:
        view = dict(body, window_start=parse_time(body["window_start"]), window_end=parse_time(body["window_end"]))
        return winner_key(view["lottery_id"], view["window_start"]), view
    return f"rejection {body['event_id']}", dict(body, event_time=parse_time(body["event_time"]))


def by_key(pairs) -> dict[str, dict]:
    """key -> view of (key, view) pairs; a key with two different views maps to both (so it can't
    equal the reference)."""
    views: dict[str, dict] = {}
    for key, view in pairs:
        views[key] = view if views.get(key, view) == view else {"conflicting": [views[key], view]}
    return views


def actual(records: list) -> dict[str, dict]:
    """Every winner and rejection on the output topics, `by_key`."""
    outcomes = (WINNERS_TOPIC, REJECTIONS_TOPIC)
    return by_key(parse_output(r.topic, r.value) for r in records if r.topic in outcomes)


def version(view: dict) -> tuple:
    """Outcomes are final, never updated: every record of a key has the same version."""
    return ()
