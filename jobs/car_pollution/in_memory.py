"""Car pollution's stages in memory: the query's stateful calls as declarations (STAGES), run
through pyspark's TwsTester one micro-batch at a time, with no Spark session (unit tests, the
grader). tests/test_queries.py checks STAGES against the query's plan."""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import Row

from jobs.car_pollution.consumer import version, view
from jobs.car_pollution.given import EVENT_COLUMNS, OP, VIEW
from jobs.car_pollution.job import ARRIVALS, KEY, READINGS, ROUTES
from joinlab.kit.events import EventSchema, micros, moment, routed, valid_events
from joinlab.kit.in_memory import Chain, last_by_version
from joinlab.kit.stages import Stage

STAGES = [Stage("moves", "jobs.car_pollution.solution.CarMovesProcessor", KEY, OP),  # ADD/DEL, readings, by zone
          Stage("zones", "jobs.car_pollution.solution.ZoneCarsProcessor", ("zone_id",), VIEW)]  # cars in a zone


def event_row(schema: EventSchema, event: dict) -> Row:
    """One valid event as the first stage gets it, keyed by ROUTES."""
    fields = routed(ROUTES, schema, event, EVENT_COLUMNS, KEY)
    return Row(**dict(fields, event_time=moment(micros(event["event_time"]))))


class InMemory(Chain):
    """STAGES through pyspark's TwsTester, one micro-batch at a time: no Spark session."""

    def __init__(self, solution: ModuleType | None = None):
        super().__init__(STAGES, solution)

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid input records as the first stage's rows."""
        return [event_row(schema, e) for schema, e in valid_events(records, [ARRIVALS, READINGS])]

    @staticmethod
    def views(out: list[Row]) -> dict:
        return last_by_version([view(r.asDict()) for r in out], "car_id", version)
