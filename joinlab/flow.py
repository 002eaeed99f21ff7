"""The one row shape every stage of a chained pattern emits, where its stages pass rows on.

A pattern declares its shape once as a DDL string; `Flow` makes its rows. A row is keyed by
(entity, id): the stage it goes to groups by both columns, and rows a stage does not own go
through it unchanged. Emitted rows carry out_time = watermark + 1 ms, the chained operators'
event-time column, which must never be behind the watermark (the event's own time stays in t_us).

    FLOW = "entity string, entity_id bigint, kind string, out_time timestamp, ..."
    flow = Flow(FLOW, ("entity", "entity_id"))
    flow("event", "user", 7, watermark_ms, event_id="e1", t_us=...)
"""
from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import Row


class Flow:
    """Rows of the shape `ddl` ('name type, ...'), keyed by the columns `key` names (entity, id)."""

    def __init__(self, ddl: str, key: tuple[str, str]):
        self.fields = [part.split(" ", 1)[0] for part in ddl.split(", ")]
        self._entity, self._id = key

    def __call__(self, kind: str, entity: str, entity_id, watermark_ms: int, **fields) -> Row:
        values = dict.fromkeys(self.fields)
        values.update({self._entity: entity, self._id: entity_id}, kind=kind,
                      out_time=datetime.fromtimestamp((max(watermark_ms, 0) + 1) / 1000, timezone.utc), **fields)
        return Row(**values)
