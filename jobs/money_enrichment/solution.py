"""Money enrichment, the solution's first stage (contract and the given UserEnrich stage:
money_enrichment_stages.py; the wiring: money_enrichment.py).

SessionJoin, keyed by ("session", session_id): drops duplicate tx_ids (remembered for the dedup
horizon of event time), joins a transaction to its session - at once when the session is there,
else the transaction waits in state until the session comes or the watermark passes its time +
the wait limit, and then goes to the lookup service. A session leaves state when the watermark
passes its start + the session duration.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessorHandle

from jobs.money_enrichment.rules import LOOKUP, STREAM
from jobs.money_enrichment.given import (SESSION_START, TX, TX_FIELDS, USER, USER_UPDATE, Timely, dead, flow, pick,
                                          schema_of)
from joinlab.events import timer_ms

TX_SCHEMA = schema_of(TX_FIELDS[1:])  # keyed by tx_id
SESSION_SCHEMA = "user_id bigint, country string, device string, start_us bigint"


class SessionJoin(Timely):
    """Stage 1, keyed by ("session", session_id); users (keyed by user) go through unchanged."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.session = handle.getValueState("session", SESSION_SCHEMA)
        self.waiting = handle.getMapState("waiting", "tx_id string", TX_SCHEMA)  # by tx_id: two in one ms are two
        self.seen = handle.getMapState("seen", "tx_id string", TX_SCHEMA)        # every tx_id within the horizon

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        rows = list(rows)
        self._session = self._read_session() if any(r.kind != USER_UPDATE for r in rows) else None  # read once
        for row in rows:
            if row.kind == USER_UPDATE:
                yield flow(USER_UPDATE, USER, str(row.user_id), watermark, user_id=row.user_id, t_us=row.t_us,
                           name=row.name, country=row.country, segment=row.segment, version=row.version)
        for row in (r for r in rows if r.kind == SESSION_START):  # sessions first: a batch's txs find them
            yield from self._start(key, row, watermark)
        for row in (r for r in rows if r.kind == TX):
            yield from self._transaction(key, pick(row, TX_FIELDS), watermark)

    def _read_session(self) -> tuple | None:
        """The session, or None (asking first: a get() on an empty state logs a warning)."""
        return tuple(self.session.get()) if self.session.exists() else None

    def _start(self, key, row, watermark: int) -> Iterator[Row]:
        session = (row.user_id, row.country, row.device, row.t_us)
        if self._session is not None:
            if self._session != session:
                yield dead(pick(row, ["session_id", "user_id", "country", "device", "t_us", "src_partition",
                                       "src_offset"]), SESSION_START,
                           "conflicting SessionStarted: the session_id was already started with other fields "
                           "(the first one read is kept)", watermark)
            return
        self.session.update(session)
        self._session = session
        self.timer(key, timer_ms(row.t_us) + self.config.session_duration_ms, watermark)
        for (tx_id,), values in list(self.waiting.iterator()):
            self.waiting.removeKey((tx_id,))
            yield self._joined(dict(zip(TX_FIELDS, (tx_id, *values))), watermark)

    def _transaction(self, key, tx: dict, watermark: int) -> Iterator[Row]:
        values = tuple(tx[name] for name in TX_FIELDS[1:])
        if self.seen.containsKey((tx["tx_id"],)):
            old = tuple(self.seen.getValue((tx["tx_id"],)))
            if old[:-2] != values[:-2]:  # the same transaction re-sent differs only in its Kafka position
                yield dead(tx, TX, "conflicting duplicate: the tx_id was already seen with other fields "
                               "(the first one read is kept)", watermark)
            return
        self.seen.updateValue((tx["tx_id"],), values)
        self.cleanup_timer(key, timer_ms(tx["t_us"]) + self.config.dedup_horizon_ms, watermark)
        if self._session is not None:
            yield self._joined(tx, watermark)
        elif watermark >= timer_ms(tx["t_us"]) + self.config.wait_limit_ms:
            yield self._to_lookup(tx, watermark)  # its session is gone, or never came in time
        else:
            self.waiting.updateValue((tx["tx_id"],), values)
            self.timer(key, timer_ms(tx["t_us"]) + self.config.wait_limit_ms, watermark)

    def _joined(self, tx: dict, watermark: int) -> Row:
        _, country, device, start_us = self._session
        return flow(TX, USER, str(tx["user_id"]), watermark, session_country=country, session_device=device,
                    session_start_us=start_us, enriched_by=STREAM, **tx)

    @staticmethod
    def _to_lookup(tx: dict, watermark: int) -> Row:
        return flow(TX, USER, str(tx["user_id"]), watermark, enriched_by=LOOKUP, **tx)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        """One sweep for every timer of the key: whatever is due at this watermark leaves."""
        watermark = timerValues.getCurrentWatermarkInMs()
        if self.cleanup_due(key, watermark, expiredTimerInfo.getExpiryTimeInMs()):
            for (tx_id,), values in list(self.seen.iterator()):
                if timer_ms(values[TX_FIELDS.index("t_us") - 1]) + self.config.dedup_horizon_ms <= watermark:
                    self.seen.removeKey((tx_id,))
        if not self.first_sweep(key, watermark):
            return
        session = self._read_session()
        if session is not None and timer_ms(session[3]) + self.config.session_duration_ms <= watermark:
            self.session.clear()
        for (tx_id,), values in list(self.waiting.iterator()):
            tx = dict(zip(TX_FIELDS, (tx_id, *values)))
            if timer_ms(tx["t_us"]) + self.config.wait_limit_ms <= watermark:
                self.waiting.removeKey((tx_id,))
                yield self._to_lookup(tx, watermark)
