"""Money enrichment's rules as plain Python: money types, the orders the rules use, as-of user
versions, first-of-type, and the job's settings. No Spark here, so the job's stages, the batch
reference and the unit tests share one contract while each applies it in its own way.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from joinlab.config import duration_ms

TYPES = ("deposit", "withdrawal", "payment", "transfer")
BY_STREAM, BY_LOOKUP = "stream", "lookup"  # how a transaction got its session: from state, or from the service


def user_version_key(t_us: int, version: int) -> tuple[int, int]:
    """The order of a user's updates: event time, then version: two updates in the same
    millisecond are both kept (state is keyed by version, not by timestamp), the higher one wins."""
    return t_us, version


def user_as_of(versions: list[tuple[int, int, dict]], t_us: int) -> dict | None:
    """The user valid at `t_us` from (t_us, version, fields) entries: the latest update at or
    before it ('at' counts: an update in the transaction's own millisecond applies)."""
    valid = [entry for entry in versions if entry[0] <= t_us]
    return max(valid, key=lambda entry: user_version_key(entry[0], entry[1]))[2] if valid else None


def tx_order(t_us: int, tx_id: str) -> tuple[int, str]:
    """Which of a user's transactions of one type came first: event time, ties broken by tx_id."""
    return t_us, tx_id


# --- Settings --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    watermark_delay_ms: int   # $MONEY_WATERMARK_DELAY: how far the watermark trails the newest event time
    session_duration_ms: int  # $MONEY_SESSION_DURATION: a session's state leaves when the watermark passes start + this
    wait_limit_ms: int        # $MONEY_WAIT_LIMIT: a transaction waits for its session until watermark > time + this
    dedup_horizon_ms: int     # $MONEY_DEDUP_HORIZON: a tx_id is remembered until watermark > time + this
    users_snapshot: str | None = None  # $MONEY_USERS_SNAPSHOT: JSON-lines UserUpdated events, initial state


DEFAULTS = {"MONEY_WATERMARK_DELAY": "10 seconds", "MONEY_SESSION_DURATION": "2 minutes",
            "MONEY_WAIT_LIMIT": "30 seconds", "MONEY_DEDUP_HORIZON": "10 minutes"}


def settings() -> Settings:
    """The job's settings from the environment (read on the driver, when the query is built)."""
    values = [duration_ms(os.environ.get(name, default), name) for name, default in DEFAULTS.items()]
    return Settings(*values, users_snapshot=os.environ.get("MONEY_USERS_SNAPSHOT") or None)
