"""Money enrichment, the solution's first stage (contract and the given UserEnrich stage:
jobs/money_enrichment/given.py; the wiring: jobs/money_enrichment/job.py).

SessionJoin, keyed by ("session", session_id): drops duplicate tx_ids (remembered for the dedup
horizon of event time), joins a transaction to its session - at once when the session is there,
else the transaction waits in state until the session comes or the watermark passes its time +
the wait limit, and then goes to the lookup service. A session leaves state when the watermark
passes its start + the session duration.

A session's state is one value (the session, its waiting transactions, the tx_ids it has seen),
read and written once per micro-batch, with one timer at the earliest of their expiries: every
state or timer call is a round trip to the JVM.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.money_enrichment.given import SESSION_START, TX, USER, USER_UPDATE, Tx, cleanup_ms, dead, flow, pick, tx_of
from jobs.money_enrichment.rules import BY_LOOKUP, BY_STREAM, Settings
from joinlab.kit.events import timer_ms
from joinlab.kit.typed_state import KeyState

# State names of an earlier layout (a value "session", maps "waiting" and "seen" per session):
# joinlab.runner refuses a checkpoint that holds them and says to run --reset.
RETIRED_STATE = ("session", "waiting", "seen")


class Session(NamedTuple):
    user_id: int
    country: str | None
    device: str | None
    start_us: int


class Joining(NamedTuple):
    """A session key's state: its session (once started), the transactions waiting for it, the
    transactions it took in within the dedup horizon, and the key's one timer."""
    timer: int | None
    session: Session | None
    waiting: list[Tx]
    seen: list[Tx]


class SessionJoin(StatefulProcessor):
    """Stage 1, keyed by ("session", session_id); users (keyed by user) go through unchanged."""

    def __init__(self, config: Settings):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = KeyState(handle, "joining", Joining, Joining(None, None, [], []))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        rows = list(rows)
        out = [flow(USER_UPDATE, USER, str(r.user_id), watermark, user_id=r.user_id, t_us=r.t_us, name=r.name,
                    country=r.country, segment=r.segment, version=r.version) for r in rows if r.kind == USER_UPDATE]
        if len(out) == len(rows):
            return iter(out)  # a user's key: no session state
        state = self.state.get(key, timerValues)
        for row in (r for r in rows if r.kind == SESSION_START):  # sessions first: a batch's txs find them
            state = self._start(state, row, watermark, out)
        for row in (r for r in rows if r.kind == TX):
            state = self._transaction(state, tx_of(row), watermark, out)
        self._store(key, state)
        return iter(out)

    def _start(self, state: Joining, row, watermark: int, out: list) -> Joining:
        session = Session(row.user_id, row.country, row.device, row.t_us)
        if state.session is not None:
            if state.session != session:
                out.append(dead(pick(row, ["session_id", "user_id", "country", "device", "t_us", "src_partition",
                                           "src_offset"]), SESSION_START,
                                "conflicting SessionStarted: the session_id was already started with other fields "
                                "(the first one read is kept)", watermark))
            return state
        out.extend(self._joined(session, tx, watermark) for tx in state.waiting)
        return state._replace(session=session, waiting=[])

    def _transaction(self, state: Joining, tx: Tx, watermark: int, out: list) -> Joining:
        old = next((s for s in state.seen if s.tx_id == tx.tx_id), None)
        if old is not None:
            # the same transaction re-sent differs only in its Kafka position: anything else is a conflict
            if old._replace(src_partition=None, src_offset=None) != tx._replace(src_partition=None, src_offset=None):
                out.append(dead(tx._asdict(), TX, "conflicting duplicate: the tx_id was already seen with other "
                                                  "fields (the first one read is kept)", watermark))
            return state
        state = state._replace(seen=state.seen + [tx])
        if state.session is not None:
            out.append(self._joined(state.session, tx, watermark))
        elif watermark >= self._wait_ms(tx):
            out.append(self._to_lookup(tx, watermark))  # its session is gone, or never came in time
        else:
            state = state._replace(waiting=state.waiting + [tx])
        return state

    def _wait_ms(self, tx: Tx) -> int:
        return timer_ms(tx.t_us) + self.config.wait_limit_ms

    def _forget_ms(self, tx: Tx) -> int:
        return cleanup_ms(timer_ms(tx.t_us) + self.config.dedup_horizon_ms)

    def _end_ms(self, session: Session) -> int:
        return timer_ms(session.start_us) + self.config.session_duration_ms

    def _store(self, key, state: Joining) -> None:
        due = [*(self._wait_ms(tx) for tx in state.waiting), *(self._forget_ms(tx) for tx in state.seen)]
        if state.session is not None:
            due.append(self._end_ms(state.session))
        self.state.put(key, state, min(due, default=None), ahead=True)

    @staticmethod
    def _joined(session: Session, tx: Tx, watermark: int) -> Row:
        return flow(TX, USER, str(tx.user_id), watermark, session_country=session.country,
                    session_device=session.device, session_start_us=session.start_us, enriched_by=BY_STREAM,
                    **tx._asdict())

    @staticmethod
    def _to_lookup(tx: Tx, watermark: int) -> Row:
        return flow(TX, USER, str(tx.user_id), watermark, enriched_by=BY_LOOKUP, **tx._asdict())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        """Whatever is due at this watermark leaves: the session, waiting transactions (to the
        lookup), seen ids past the horizon."""
        watermark = timerValues.getCurrentWatermarkInMs()
        state = self.state.get(key, timerValues, expiredTimerInfo)
        late = [tx for tx in state.waiting if self._wait_ms(tx) <= watermark]
        session = state.session if state.session is not None and self._end_ms(state.session) > watermark else None
        self._store(key, state._replace(session=session, waiting=[tx for tx in state.waiting if tx not in late],
                                        seen=[tx for tx in state.seen if self._forget_ms(tx) > watermark]))
        return iter([self._to_lookup(tx, watermark) for tx in late])
