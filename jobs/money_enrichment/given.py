"""Money enrichment's stages' contract, and the given second stage.

Two transformWithState stages, each keyed by the id its join needs:
  1. SessionJoin, keyed by ("session", session_id): dedup, waiting for the session, expiry (the
     solution module: jobs/money_enrichment/solution.py, or a candidate's exercise file);
  2. UserEnrich (here: given, in the exercise too), keyed by ("user", user_id): keeps every
     version of the user (keyed by version, never by timestamp), holds each transaction until
     the watermark passes its time, then in (event time, tx_id) order adds the user as of that
     time and flags the first transaction of each money type. What arrives later than that is
     corrected, not lost: a late transaction is decided at once and, if it is the user's new
     first of its type, the old first is re-emitted unflagged; a late user update re-emits the
     already decided transactions it changes (those still remembered: the dedup horizon).

Every stage emits one row shape (FLOW). Rows a stage does not own go through it unchanged:
users through stage 1, dead letters through stage 2. Emitted rows carry out_time = watermark +
1 ms, the chained operators' event-time column (the event's own time is t_us).
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.money_enrichment.rules import Settings, tx_order, user_as_of, user_version_key
from joinlab.events import timer_ms
from joinlab.flow import Flow, entity_key
from joinlab.named_state import grouping_key

SESSION, USER, PASS = "session", "user", "pass"        # entities: what a row is keyed by
TX, USER_UPDATE, SESSION_START = "tx", "user", "session"  # input kinds
ENRICHED, DEAD = "enriched", "dead"                     # output kinds

TX_FIELDS = ["tx_id", "user_id", "session_id", "amount", "currency", "type", "t_us", "src_partition", "src_offset"]
SESSION_FIELDS = ["session_country", "session_device", "session_start_us"]
USER_FIELDS = ["user_name", "user_country", "user_segment", "user_version"]
# The input of stage 1: one valid event; a session's or user's own fields come in country,
# device, name, segment and version.
EVENT_COLUMNS = ["entity", "entity_key", "kind", *TX_FIELDS, "country", "device", "name", "segment", "version"]
FLOW = ("entity string, entity_key string, kind string, out_time timestamp, tx_id string, user_id bigint, "
        "session_id string, amount double, currency string, type string, t_us bigint, src_partition bigint, "
        "src_offset bigint, country string, device string, name string, segment string, version bigint, "
        "session_country string, session_device string, session_start_us bigint, user_name string, "
        "user_country string, user_segment string, user_version bigint, first_of_type boolean, "
        "enriched_by string, reason string, source_topic string")
flow = Flow(FLOW)  # flow(kind, entity, entity_key, watermark_ms, **fields) -> Row
schema_of = flow.schema_of  # the DDL of FLOW's columns `names`, in that order


DECIDED_SCHEMA = schema_of(TX_FIELDS[1:] + SESSION_FIELDS + USER_FIELDS + ["first_of_type", "enriched_by"])
USER_SCHEMA = "t_us bigint, name string, country string, segment string"  # keyed by version


def pick(row, names: list[str]) -> dict:
    return {name: getattr(row, name) for name in names}


def dead(fields: dict, source: str, reason: str, watermark_ms: int) -> Row:
    """A dead letter of the event `fields` (read from topic kind `source`) with its reason."""
    key = fields.get("tx_id") or fields.get("session_id")
    return flow(DEAD, PASS, key, watermark_ms, reason=reason, source_topic=source, **fields)


CLEANUP_GRID_MS = 60_000  # clean-up timers are rounded up to whole minutes, so a key's ids share them


class Timely(StatefulProcessor):
    """What both stages do with timers, economically: every call to state or timers is a round
    trip to the JVM, so a key is swept once per batch (not once per expired timer), and a timer
    that already exists is not registered again."""

    def __init__(self, config: Settings):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self._known: tuple = (None, {})  # (watermark, grouping key -> its timers), listed once per key and batch
        self._swept: tuple = (None, set())  # (watermark, keys swept at it)

    def _timers(self, key, watermark_ms: int) -> set[int]:
        if self._known[0] != watermark_ms:
            self._known = (watermark_ms, {})
        key = grouping_key(key)
        if key not in self._known[1]:
            self._known[1][key] = set(self.handle.listTimers())
        return self._known[1][key]

    def timer(self, key, expiry_ms: int, watermark_ms: int) -> None:
        """A timer at `expiry_ms`, or just past the watermark when that is already behind it (a
        timer must lie ahead of the watermark): what is overdue leaves at the next sweep."""
        expiry_ms = max(expiry_ms, watermark_ms + 1)
        known = self._timers(key, watermark_ms)
        if expiry_ms not in known:
            self.handle.registerTimer(expiry_ms)
            known.add(expiry_ms)

    def wake(self, key, expiry_ms: int, watermark_ms: int, firing: bool = False) -> None:
        """Some timer of the key at or before `expiry_ms`: any timer sweeps everything due, and
        each sweep wakes the key again for what is left, so a key needs one timer, not one per
        event. While timers fire (`firing`), those at or behind the watermark are going."""
        floor = watermark_ms if firing else None
        if not any((floor is None or t > floor) and t <= expiry_ms for t in self._timers(key, watermark_ms)):
            self.timer(key, expiry_ms, watermark_ms)

    def cleanup_timer(self, key, due_ms: int, watermark_ms: int) -> None:
        self.timer(key, -(-due_ms // CLEANUP_GRID_MS) * CLEANUP_GRID_MS, watermark_ms)

    def first_sweep(self, key, watermark_ms: int, kind: str = "due") -> bool:
        """True once per key, watermark and kind of sweep: the first expired timer sweeps whatever
        is due. Clean-up sweeps (kind "cleanup") run only when a clean-up timer fires."""
        if self._swept[0] != watermark_ms:
            self._swept = (watermark_ms, set())
        if (key, kind) in self._swept[1]:
            return False
        self._swept[1].add((key, kind))
        return True

    def cleanup_due(self, key, watermark_ms: int, expiry_ms: int) -> bool:
        return expiry_ms % CLEANUP_GRID_MS == 0 and self.first_sweep(key, watermark_ms, "cleanup")

    def close(self) -> None:
        pass


class UserEnrich(Timely):
    """Stage 2, keyed by ("user", user_id); dead letters (entity "pass") go through unchanged."""

    USER_SCHEMA = USER_SCHEMA  # a later release may add fields at the end (see SPARK_CONF in the job)

    def init(self, handle: StatefulProcessorHandle) -> None:
        super().init(handle)
        self.users = handle.getMapState("users", "version bigint", self.USER_SCHEMA)
        self.pending = handle.getMapState("pending", "tx_id string", DECIDED_SCHEMA)  # until the watermark passes
        self.decided = handle.getMapState("decided", "tx_id string", DECIDED_SCHEMA)  # for corrections (horizon)
        self.firsts = handle.getMapState("firsts", "type string", DECIDED_SCHEMA + ", tx_id string")

    def handleInitialState(self, key, initialState, timerValues) -> None:
        """A snapshot of users (MONEY_USERS_SNAPSHOT): a fresh job knows them before the stream replays."""
        self._remember(initialState)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        rows = list(rows)
        if entity_key(key)[0] == PASS:
            yield from rows
            return
        self._versions = self._firsts = None  # this key's, read on first use (each read is a round trip)
        updates = [r for r in rows if r.kind == USER_UPDATE]
        for row in updates:
            self._remember(row)
        if updates:  # superseded versions leave once they are older than the horizon
            self.cleanup_timer(key, timer_ms(max(r.t_us for r in updates)) + self.config.dedup_horizon_ms, watermark)
        for row in sorted(updates, key=lambda r: r.t_us):
            if row.t_us <= watermark * 1000:  # late: some decided transactions may have used an older version
                yield from self._correct_users(key, row.t_us, watermark)
        for row in sorted((r for r in rows if r.kind == TX), key=lambda r: tx_order(r.t_us, r.tx_id)):
            tx = pick(row, TX_FIELDS + SESSION_FIELDS + ["enriched_by"])
            if row.t_us <= watermark * 1000:
                yield from self._decide(key, tx, watermark)  # late: decide now, correct the first if needed
            else:
                self.pending.updateValue((row.tx_id,), self._values(tx))
                self.wake(key, timer_ms(row.t_us), watermark)

    def _forget_versions(self, watermark: int) -> None:
        """Of the versions older than the dedup horizon, only the newest can still be anyone's
        as-of version: corrections and decisions reach back no further (docs/money_enrichment.md)."""
        old = [(t, version) for (version,), (t, *_) in self.users.iterator()
               if timer_ms(t) + self.config.dedup_horizon_ms <= watermark]
        for t, version in sorted(old, key=lambda v: user_version_key(*v))[:-1]:
            self.users.removeKey((version,))
        if len(old) > 1:
            self._versions = None

    def _remember(self, row) -> None:
        self.users.updateValue((row.version,), (row.t_us, row.name, row.country, row.segment))
        self._versions = None

    def _user_at(self, t_us: int) -> dict:
        if self._versions is None:
            self._versions = [(t, version, {"user_name": name, "user_country": country, "user_segment": segment,
                                            "user_version": version})
                              for (version,), (t, name, country, segment, *_) in self.users.iterator()]
        return user_as_of(self._versions, t_us) or dict.fromkeys(USER_FIELDS)

    def _first(self, kind: str) -> dict | None:
        if self._firsts is None:
            self._firsts = {k: self._tx(values[-1], values[:-1]) for (k,), values in self.firsts.iterator()}
        return self._firsts.get(kind)

    def _set_first(self, tx: dict) -> None:
        self.firsts.updateValue((tx["type"],), (*self._values(tx), tx["tx_id"]))
        self._firsts[tx["type"]] = tx

    @staticmethod
    def _values(tx: dict) -> tuple:
        return tuple(tx.get(name) for name in DECIDED_SCHEMA_NAMES)

    @staticmethod
    def _tx(tx_id: str, values) -> dict:
        return dict(zip(["tx_id", *DECIDED_SCHEMA_NAMES], (tx_id, *values)))

    def _emit(self, key, tx: dict, watermark: int) -> Row:
        self.decided.updateValue((tx["tx_id"],), self._values(tx))
        self.cleanup_timer(key, timer_ms(tx["t_us"]) + self.config.dedup_horizon_ms, watermark)
        return flow(ENRICHED, USER, str(tx["user_id"]), watermark, **tx)

    def _decide(self, key, tx: dict, watermark: int) -> Iterator[Row]:
        tx = {**tx, **self._user_at(tx["t_us"])}
        first = self._first(tx["type"])
        tx["first_of_type"] = first is None or tx_order(tx["t_us"], tx["tx_id"]) <= tx_order(first["t_us"],
                                                                                            first["tx_id"])
        if tx["first_of_type"]:
            if first is not None and first["tx_id"] != tx["tx_id"]:
                yield self._emit(key, {**first, "first_of_type": False}, watermark)  # it arrived first, but wasn't
            self._set_first(tx)
        yield self._emit(key, tx, watermark)

    def _correct_users(self, key, since_us: int, watermark: int) -> Iterator[Row]:
        """Re-emit the decided transactions at or after a late user update whose user changed."""
        for (tx_id,), values in list(self.decided.iterator()):
            tx = self._tx(tx_id, values)
            if tx["t_us"] >= since_us:
                user = self._user_at(tx["t_us"])
                if any(tx[name] != user[name] for name in USER_FIELDS):
                    yield self._emit(key, {**tx, **user}, watermark)
                    first = self._first(tx["type"])
                    if first is not None and first["tx_id"] == tx_id:
                        self._set_first({**tx, **user})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        if self.cleanup_due(key, watermark, expiredTimerInfo.getExpiryTimeInMs()):
            for (tx_id,), values in list(self.decided.iterator()):
                if timer_ms(values[DECIDED_SCHEMA_NAMES.index("t_us")]) + self.config.dedup_horizon_ms <= watermark:
                    self.decided.removeKey((tx_id,))
            self._forget_versions(watermark)
        if not self.first_sweep(key, watermark):
            return
        self._versions = self._firsts = None
        held = [self._tx(tx_id, values) for (tx_id,), values in self.pending.iterator()]
        due = [tx for tx in held if tx["t_us"] <= watermark * 1000]
        later = [tx["t_us"] for tx in held if tx["t_us"] > watermark * 1000]
        if later:
            self.wake(key, timer_ms(min(later)), watermark, firing=True)
        for tx in sorted(due, key=lambda t: tx_order(t["t_us"], t["tx_id"])):
            self.pending.removeKey((tx["tx_id"],))
            yield from self._decide(key, tx, watermark)


DECIDED_SCHEMA_NAMES = [part.split()[0] for part in DECIDED_SCHEMA.split(", ")]
