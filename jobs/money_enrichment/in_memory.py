"""Money enrichment's stages in memory: the query's stateful calls as declarations (STAGES), then
the lookup step, run through pyspark's TwsTester one micro-batch at a time, with no Spark session
(unit tests, the grader). tests/test_queries.py checks STAGES against the query's plan."""
from __future__ import annotations

from types import ModuleType

from pyspark.sql import Row

from jobs.money_enrichment.given import DEAD, ENRICHED, EVENT_COLUMNS, FLOW, KEY, SESSION_START, UserEnrich
from jobs.money_enrichment.job import KINDS, ROUTES, SCHEMAS
from jobs.money_enrichment.lookup import enrich_rows
from jobs.money_enrichment.rules import Settings, settings
from joinlab.kit.events import micros, moment, routed, valid_events
from joinlab.kit.in_memory import Chain
from joinlab.kit.stages import Stage
from joinlab.lookup import LookupResult

STAGES = [
    # by session: dedup, the wait for the session; a joined transaction goes on keyed by its user
    Stage("join", "jobs.money_enrichment.solution.SessionJoin", KEY, FLOW, event_time=True, emits_time=True,
          make=lambda c: (c,)),
    # by user: the user as of the transaction's time, first of type
    Stage("enrich", UserEnrich, KEY, FLOW, event_time=True, initial=True, make=lambda c: (c,))]


class InMemory(Chain):
    """STAGES, then the lookup step, through pyspark's TwsTester, one micro-batch at a time: no
    Spark session. The lookup service knows `sessions` (session_id -> SessionStarted event as on
    the topic); by default, as the real service reading the sessions topic, every session of the
    batches so far. `users`: stage 2's initial state (rows of `users_snapshot`)."""

    def __init__(self, solution: ModuleType | None = None, config: Settings | None = None,
                 sessions: dict | None = None, users: list[Row] = ()):
        self.config = config or settings()
        super().__init__(STAGES, solution, self.config, self.config.watermark_delay_ms, users)
        self.sessions, self.reads_topic = sessions if sessions is not None else {}, sessions is None
        self.lookups = []

    @staticmethod
    def rows(records) -> list[Row]:
        """Valid events as stage 1's rows."""
        out = []
        for record in records:
            for schema, e in valid_events([record], SCHEMAS):
                fields = routed(ROUTES, schema, e, EVENT_COLUMNS, KEY, "string")
                fields.update(kind=KINDS[schema.topic], t_us=micros(e["event_time"]),
                              src_partition=getattr(record, "partition", None),
                              src_offset=getattr(record, "offset", None))
                out.append(Row(**fields))
        return out

    def _lookup(self, ids):
        self.lookups += ids
        known = self.sessions
        return {i: LookupResult(known.get(i), None if i in known else "session not found (HTTP 404)", 1) for i in ids}

    def _read_sessions(self, rows: list[Row]) -> None:
        """What the lookup service has read off the sessions topic by this batch (first one wins)."""
        for r in rows:
            if r.kind == SESSION_START:
                self.sessions.setdefault(r.session_id, {"session_id": r.session_id, "user_id": r.user_id,
                                                        "country": r.country, "device": r.device,
                                                        "event_time": moment(r.t_us).isoformat()})

    def batch(self, rows: list[Row], watermark: int | None = None) -> list[dict]:
        """One micro-batch: FLOW rows (as dicts) of kind "enriched" or "dead", after the lookup step."""
        if self.reads_topic:
            self._read_sessions(rows)
        return enrich_rows([r.asDict() for r in super().batch(rows, watermark)], self._lookup)

    @staticmethod
    def dead_letters(out: list[dict]) -> dict:
        """tx_id (or session_id) -> the reason of its last dead letter."""
        return {r["entity_id"]: r["reason"] for r in out if r["kind"] == DEAD}

    @staticmethod
    def views(out: list[dict]) -> dict:
        """tx_id -> its last enriched record as `actual` reads it."""
        shown = ("tx_id", "user_id", "session_id", "currency", "type", "session_country", "session_device",
                 "user_name", "user_country", "user_segment", "user_version", "first_of_type")
        return {r["tx_id"]: {**{name: r[name] for name in shown}, "amount": float(r["amount"]),
                             "event_time": moment(r["t_us"]), "session_started_at": moment(r["session_start_us"])}
                for r in out if r["kind"] == ENRICHED}
