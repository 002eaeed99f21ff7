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

Every stage emits one row shape (FLOW, joinlab.kit.stages.Flow). Rows a stage does not own go through
it unchanged: users through stage 1, dead letters through stage 2.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, get_type_hints

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.money_enrichment.rules import Settings, tx_order, user_as_of, user_version_key
from joinlab.kit.events import timer_ms
from joinlab.kit.typed_state import KeyState, grouping_key
from joinlab.kit.stages import Flow

SESSION, USER, PASS = "session", "user", "pass"        # entities: what a row is keyed by
TX, USER_UPDATE, SESSION_START = "tx", "user-update", "session-start"  # input kinds (never an entity's name)
ENRICHED, DEAD = "enriched", "dead"                     # output kinds


class Tx(NamedTuple):
    """A transaction as read."""
    tx_id: str
    user_id: int
    session_id: str
    amount: float
    currency: str | None
    type: str
    t_us: int
    src_partition: int | None
    src_offset: int | None


TX_FIELDS = list(Tx._fields)
SESSION_FIELDS = ["session_country", "session_device", "session_start_us"]
USER_FIELDS = ["user_name", "user_country", "user_segment", "user_version"]
KEY = ("entity", "entity_id")  # every stage groups by the rows' own (entity, id)
# The input of stage 1: one valid event, routed by KEY; a session's or user's own fields come in country,
# device, name, segment and version.
EVENT_COLUMNS = ["entity", "entity_id", "kind", *TX_FIELDS, "country", "device", "name", "segment", "version"]
FLOW = ("entity string, entity_id string, kind string, emitted_at timestamp, tx_id string, user_id bigint, "
        "session_id string, amount double, currency string, type string, t_us bigint, src_partition bigint, "
        "src_offset bigint, country string, device string, name string, segment string, version bigint, "
        "session_country string, session_device string, session_start_us bigint, user_name string, "
        "user_country string, user_segment string, user_version bigint, first_of_type boolean, "
        "enriched_by string, reason string, source_kind string")
flow = Flow(FLOW, KEY)  # flow(kind, entity, entity_id, watermark_ms, **fields) -> Row


USER_SCHEMA = "t_us bigint, name string, country string, segment string"  # keyed by version


def pick(row, names: list[str]) -> dict:
    return {name: getattr(row, name) for name in names}


def dead(fields: dict, source: str, reason: str, watermark_ms: int) -> Row:
    """A dead letter of the event `fields` (of the input kind `source`: TX or SESSION_START) with its reason."""
    key = fields.get("tx_id") or fields.get("session_id")
    return flow(DEAD, PASS, key, watermark_ms, reason=reason, source_kind=source, **fields)


CLEANUP_GRID_MS = 60_000  # clean-ups are rounded up to whole minutes, so a key's ids leave together


def cleanup_ms(due_ms: int) -> int:
    """The whole minute at or after `due_ms`: when what is due then leaves state."""
    return -(-due_ms // CLEANUP_GRID_MS) * CLEANUP_GRID_MS


def tx_of(row) -> Tx:
    return Tx(*(getattr(row, name) for name in TX_FIELDS))


# A transaction with its session and user (Tx's fields, then these): pending until the watermark
# passes its time, then decided (and remembered for corrections).
Decided = NamedTuple("Decided", [
    *get_type_hints(Tx).items(), ("session_country", str | None), ("session_device", str | None),
    ("session_start_us", int | None), ("user_name", str | None), ("user_country", str | None),
    ("user_segment", str | None), ("user_version", int | None), ("first_of_type", bool | None),
    ("enriched_by", str | None)])


def _decided(tx: dict) -> Decided:
    return Decided(**{name: tx.get(name) for name in Decided._fields})


class UserTxs(NamedTuple):
    """A user's transactions: pending (until the watermark passes their time), decided (for
    corrections, until their time + the dedup horizon), the first of each money type (for good);
    when the next superseded user version can leave (`forget`), and the key's one timer."""
    timer: int | None
    pending: list[Decided]
    decided: list[Decided]
    firsts: list[Decided]
    forget: int | None


# UserEnrich's state of an earlier layout (maps per user), which this one keeps in "txs", found in
# the operator that declares "users": joinlab.runner refuses such a checkpoint and says to run --reset.
RETIRED_STATE = {"users": ("pending", "decided", "firsts")}


class UserEnrich(StatefulProcessor):
    """Stage 2, keyed by ("user", user_id); dead letters (entity "pass") go through unchanged.
    A user's transactions are one value, read and written once per micro-batch, with one timer
    at the earliest moment something is due; the user's versions are a map by version, read once
    per batch when a decision needs them."""

    USER_SCHEMA = USER_SCHEMA  # a later release may add fields at the end (see SPARK_CONF in the job)

    def __init__(self, config: Settings):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.users = handle.getMapState("users", "version bigint", self.USER_SCHEMA)
        self.txs = KeyState(handle, "txs", UserTxs, UserTxs(None, [], [], [], None))

    def handleInitialState(self, key, initialState, timerValues) -> None:
        """A snapshot of users (MONEY_USERS_SNAPSHOT): a fresh job knows them before the stream replays."""
        self._remember(initialState)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        rows = list(rows)
        if grouping_key(key)[0] == PASS:
            return iter(rows)
        self._open(self.txs.get(key, timerValues))
        out = []
        updates = [r for r in rows if r.kind == USER_UPDATE]
        for row in updates:
            self._remember(row)
        if updates:
            self._load_versions()  # when the next superseded version can leave
        for row in sorted(updates, key=lambda r: r.t_us):
            if row.t_us <= watermark * 1000:  # late: some decided transactions may have used an older version
                out += self._correct_users(row.t_us, watermark)
        for row in sorted((r for r in rows if r.kind == TX), key=lambda r: tx_order(r.t_us, r.tx_id)):
            tx = pick(row, TX_FIELDS + SESSION_FIELDS + ["enriched_by"])
            if row.t_us <= watermark * 1000:
                out += self._settle(tx, watermark)  # late: settle it now, correct the first if needed
            else:
                self._pending[row.tx_id] = tx
        self._store(key)
        return iter(out)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        """Whatever is due at this watermark: pending transactions the watermark has passed are
        decided in order; then decided transactions and superseded versions past the horizon leave
        (deciding first: a decision may still need a version that is leaving)."""
        watermark = timerValues.getCurrentWatermarkInMs()
        self._open(self.txs.get(key, timerValues, expiredTimerInfo))
        due = sorted((tx for tx in self._pending.values() if tx["t_us"] <= watermark * 1000),
                     key=lambda t: tx_order(t["t_us"], t["tx_id"]))
        out = []
        for tx in due:
            del self._pending[tx["tx_id"]]
            out += self._settle(tx, watermark)
        self._decided = {i: tx for i, tx in self._decided.items() if self._forget_ms(tx["t_us"]) > watermark}
        if self._forget is not None and self._forget <= watermark:
            self._forget_versions(watermark)
        self._store(key)
        return iter(out)

    # --- The key's state in this handler call ---------------------------------------------------

    def _open(self, value: UserTxs) -> None:
        self._value, self._versions, self._forget = value, None, value.forget
        self._pending = {tx.tx_id: tx._asdict() for tx in value.pending}
        self._decided = {tx.tx_id: tx._asdict() for tx in value.decided}
        self._firsts = {tx.type: tx._asdict() for tx in value.firsts}

    def _forget_ms(self, t_us: int) -> int:
        """When what happened at `t_us` (a decided transaction, a superseded version) can leave."""
        return cleanup_ms(timer_ms(t_us) + self.config.dedup_horizon_ms)

    def _store(self, key) -> None:
        value = UserTxs(self._value.timer, [_decided(tx) for tx in self._pending.values()],
                        [_decided(tx) for tx in self._decided.values()], [_decided(tx) for tx in self._firsts.values()],
                        self._forget)
        due = [*(timer_ms(tx["t_us"]) for tx in self._pending.values()),
               *(self._forget_ms(tx["t_us"]) for tx in self._decided.values())]
        if self._forget is not None:
            due.append(self._forget)
        self.txs.put(key, value, min(due, default=None), ahead=True)

    # --- Users ----------------------------------------------------------------------------------

    def _remember(self, row) -> None:
        self.users.updateValue((row.version,), (row.t_us, row.name, row.country, row.segment))
        self._versions = None

    def _load_versions(self) -> list[tuple[int, int, dict]]:
        """The user's versions as (t_us, version, USER_FIELDS), read once per handler call."""
        if self._versions is None:
            self._versions = [(t, version, {"user_name": name, "user_country": country, "user_segment": segment,
                                            "user_version": version})
                              for (version,), (t, name, country, segment, *_) in self.users.iterator()]
            self._forget = self._next_forget()
        return self._versions

    def _user_at(self, t_us: int) -> dict:
        return user_as_of(self._load_versions(), t_us) or dict.fromkeys(USER_FIELDS)

    def _next_forget(self) -> int | None:
        """When the oldest version can leave: once the next one is older than the horizon too
        (then the older can be nobody's as-of version: corrections and decisions reach back no
        further, jobs/money_enrichment/README.md)."""
        ordered = sorted(self._versions, key=lambda v: user_version_key(v[0], v[1]))
        return self._forget_ms(ordered[1][0]) if len(ordered) > 1 else None

    def _forget_versions(self, watermark: int) -> None:
        """Of the versions older than the dedup horizon, only the newest stays."""
        old = sorted(((t, version) for t, version, _ in self._load_versions() if self._forget_ms(t) <= watermark),
                     key=lambda v: user_version_key(*v))
        for _, version in old[:-1]:
            self.users.removeKey((version,))
        if len(old) > 1:
            self._versions = None
            self._load_versions()

    # --- Decisions ------------------------------------------------------------------------------

    def _emit(self, tx: dict, watermark: int) -> Row:
        self._decided[tx["tx_id"]] = tx
        return flow(ENRICHED, USER, str(tx["user_id"]), watermark, **tx)

    def _settle(self, tx: dict, watermark: int) -> list[Row]:
        """One transaction the watermark passed: with its user as of its time, flagged if it is the first
        of its type (the earlier first re-emitted unflagged)."""
        first = self._firsts.get(tx["type"])
        is_first = first is None or tx_order(tx["t_us"], tx["tx_id"]) <= tx_order(first["t_us"], first["tx_id"])
        tx = {**tx, **self._user_at(tx["t_us"]), "first_of_type": is_first}
        out = []
        if is_first:
            if first is not None and first["tx_id"] != tx["tx_id"]:
                out.append(self._emit({**first, "first_of_type": False}, watermark))  # it arrived first, but wasn't
            self._firsts[tx["type"]] = tx
        out.append(self._emit(tx, watermark))
        return out

    def _correct_users(self, since_us: int, watermark: int) -> list[Row]:
        """Re-emit the decided transactions at or after a late user update whose user changed."""
        out = []
        for tx in list(self._decided.values()):
            if tx["t_us"] >= since_us:
                user = self._user_at(tx["t_us"])
                if any(tx[name] != user[name] for name in USER_FIELDS):
                    out.append(self._emit({**tx, **user}, watermark))
                    first = self._firsts.get(tx["type"])
                    if first is not None and first["tx_id"] == tx["tx_id"]:
                        self._firsts[tx["type"]] = {**tx, **user}
        return out
