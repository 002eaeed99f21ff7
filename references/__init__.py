"""Batch references: what the right answer is, computed in plain Python from the input topics.

What every reference starts from, beside the jobs' own rules of validity (joinlab.kit.events): the
valid events with the highest version per key, and Spark's watermark as a stream-stream join
meets each event.
"""
from __future__ import annotations

from joinlab.kit.events import EventSchema, micros, valid_events


def latest_events(records, keys: list[tuple[EventSchema, str]], version: str) -> dict[str, dict]:
    """Per topic, per value of its key field: the valid event with the highest `version` (on a tie
    the first one read: equal versions are duplicates). What every batch reference starts from."""
    tables: dict[str, dict] = {schema.topic: {} for schema, _ in keys}
    key_field = {schema.topic: field for schema, field in keys}
    for schema, event in valid_events(records, [schema for schema, _ in keys]):
        table, key = tables[schema.topic], event[key_field[schema.topic]]
        if key not in table or event[version] > table[key][version]:
            table[key] = event
    return tables


def join_watermarks(batches, schemas: list[EventSchema], delay_ms: int) -> tuple[list[tuple], int | None]:
    """Spark's watermark as a stream-stream join of the `schemas`' topics meets each valid event of
    `batches` (lists of records, in order, each read as one micro-batch): ([(batch number, schema,
    event, event time in us, the watermark in us or None)], the watermark after the last batch).
    A micro-batch runs with the watermark of the ones before it: per side the newest event time (in
    ms, as Spark keeps it) minus the delay, the smaller of the sides' (Spark's default policy), and
    0 (None here) until every side has had an event, so nothing is late before that."""
    newest: dict[str, int] = {}  # side -> newest event time (ms) of the micro-batches before

    def mark() -> int | None:
        return (min(newest.values()) - delay_ms) * 1000 if len(newest) == len(schemas) else None
    out = []
    for number, batch in enumerate(batches):
        before, seen = mark(), {}
        for schema, event in valid_events(batch, schemas):
            t_us = micros(event["event_time"])
            out.append((number, schema, event, t_us, before))
            seen[schema.topic] = max(seen.get(schema.topic, t_us // 1000), t_us // 1000)
        for side, t_ms in seen.items():
            newest[side] = max(newest.get(side, t_ms), t_ms)
    return out, mark()
