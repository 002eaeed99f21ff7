"""The right answer for money enrichment, in plain Python from the input topics: every rule at
once over the whole history, no keys, no state, no arrival order beyond "first one read".

What the job has decided by the end depends only on event times: a transaction is decided once
the final watermark (newest event time - delay) has passed it, so the reference expects those
and only those. A transaction without any session is a dead letter (the lookup finds none).

Not compared: `enriched_by` (stream or lookup) says how the job got the session - from its state
or from the lookup service - which depends on when records arrived, not on the events; the
session's fields are the same either way. `notes` reports it, with the sink's re-emitted duplicates.
"""
from __future__ import annotations

import json

from jobs.money_enrichment.job import ENRICHED_TOPIC, SCHEMAS, SESSIONS_TOPIC, TRANSACTIONS_TOPIC, USERS_TOPIC
from jobs.money_enrichment.consumer import actual, parse_output, version  # noqa: F401 (the output contract)
from jobs.money_enrichment.rules import BY_LOOKUP, Settings, settings, tx_order, user_as_of
from joinlab.kit.events import micros, moment, timer_ms, valid_events


def _first_read(records, topic: str, key: str) -> dict:
    """The first valid event per key of a topic (a later one with the same key is a duplicate)."""
    found: dict = {}
    for schema, event in valid_events(records, SCHEMAS):
        if schema.topic == topic:
            found.setdefault(event[key], event)
    return found


def final_watermark_us(records, config: Settings) -> int | None:
    newest = max((micros(event["event_time"]) for _, event in valid_events(records, SCHEMAS)), default=None)
    return None if newest is None else (newest // 1000 - config.watermark_delay_ms) * 1000


def final_watermark_ms(records: list) -> int | None:
    """The watermark (the job's settings) after which the job has decided every transaction of `records`."""
    final_us = final_watermark_us(records, settings())
    return None if final_us is None else final_us // 1000


def user_versions(records) -> dict[int, list]:
    """user_id -> [(t_us, version, user fields)]; a version read twice is one version."""
    versions: dict[int, dict] = {}
    for schema, event in valid_events(records, SCHEMAS):
        if schema.topic == USERS_TOPIC:
            fields = {"user_name": event["name"], "user_country": event["country"],
                      "user_segment": event["segment"], "user_version": event["version"]}
            versions.setdefault(event["user_id"], {}).setdefault(
                event["version"], (micros(event["event_time"]), event["version"], fields))
    return {user: list(by_version.values()) for user, by_version in versions.items()}


def expected(records: list, config: Settings | None = None) -> dict[str, dict]:
    """tx_id -> the enriched transaction the job's output must end with."""
    config = config or settings()
    watermark = final_watermark_us(records, config)
    if watermark is None:
        return {}
    sessions = _first_read(records, SESSIONS_TOPIC, "session_id")
    transactions = _first_read(records, TRANSACTIONS_TOPIC, "tx_id")
    users = user_versions(records)

    def reached_stage_2(tx: dict) -> bool:
        """Joined to its session, or waited out its wait limit (then looked up)."""
        t_us = micros(tx["event_time"])
        if tx["session_id"] in sessions:
            return t_us <= watermark
        return timer_ms(t_us) + config.wait_limit_ms <= watermark // 1000

    firsts: dict[tuple, tuple] = {}
    for tx in transactions.values():
        if reached_stage_2(tx):
            kind, order = (tx["user_id"], tx["type"]), tx_order(micros(tx["event_time"]), tx["tx_id"])
            firsts[kind] = min(firsts.get(kind, order), order)
    out = {}
    for tx_id, tx in transactions.items():
        session, t_us = sessions.get(tx["session_id"]), micros(tx["event_time"])
        if session is None or t_us > watermark:
            continue
        user = user_as_of(users.get(tx["user_id"], []), t_us) or dict.fromkeys(
            ["user_name", "user_country", "user_segment", "user_version"])
        out[tx_id] = {"tx_id": tx_id, "user_id": tx["user_id"], "session_id": tx["session_id"],
                      "amount": float(tx["amount"]), "currency": tx["currency"], "type": tx["type"],
                      "event_time": moment(t_us), "session_country": session["country"],
                      "session_device": session["device"],
                      "session_started_at": moment(micros(session["event_time"])), **user,
                      "first_of_type": firsts[(tx["user_id"], tx["type"])] == tx_order(t_us, tx_id)}
    return out


def notes(records: list) -> list[str]:
    """How the outputs were made: lookups, corrections, and re-emitted duplicates (identical
    consecutive records of one key: the at-least-once sink replaying a batch after a restart)."""
    last: dict[str, bytes] = {}
    by: dict[str, str] = {}
    duplicates = corrections = 0
    for record in records:
        if record.topic != ENRICHED_TOPIC:
            continue
        body = json.loads(record.value)
        key = body["tx_id"]
        if key in last:
            duplicates += last[key] == record.value
            corrections += last[key] != record.value
        last[key], by[key] = record.value, body["enriched_by"]
    lookups = sum(method == BY_LOOKUP for method in by.values())
    return [f"{len(last)} transactions: {len(last) - lookups} enriched from state, {lookups} by lookup; "
            f"{corrections} corrections, {duplicates} re-emitted duplicates (same key, same content)"]
