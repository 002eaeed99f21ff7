"""The lottery's rules as plain Python: event types, rejection messages, windows, the seeded draw
and the job's settings. No Spark here, so the job's stages and the batch reference share the
contract (what a message says, who wins) while each applies the rules in its own way.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from joinlab.config import duration_ms

STARTED, BOUGHT, CLICKED = "LotteryStarted", "CouponsBought", "Clicked"
# Ties in event time are broken by type, then event id: a start or a purchase at the same
# millisecond as a click counts for that click.
RANK = {STARTED: 0, BOUGHT: 1, CLICKED: 2}

ALREADY_STARTED, NON_POSITIVE, INACTIVE, NO_COUPON, LATE = (
    "already-started", "non-positive-amount", "inactive-lottery", "no-coupon", "late")

WINDOW_US = 10_000_000  # 10-second tumbling windows, [start, start + 10 s)
# An event id is remembered (a re-send dropped) until the watermark passes its time + this. A
# re-send older than that is behind the watermark: rejected as late, never counted twice.
DEDUP_HORIZON_US = 10 * 60 * 1_000_000


def message(rule: str, event_type: str, lottery_id: int | None, user_id: int | None) -> str:
    """The rejection message of `rule` for an event (the wording of the original, plus lateness)."""
    if rule == ALREADY_STARTED:
        return f"Cannot start already started lottery, lotteryId: {lottery_id}"
    if rule == NON_POSITIVE:
        return "Cannot buy negative amount of coupons"
    if rule == INACTIVE:
        return f"Cannot click on inactive lottery, lotteryId: {lottery_id}"
    if rule == NO_COUPON:
        return f"User has no coupon, userId: {user_id}"
    if rule == LATE:
        if event_type == CLICKED:
            return f"Late click behind the watermark, lotteryId: {lottery_id}"
        if event_type == BOUGHT:
            return f"Late coupon purchase behind the watermark, userId: {user_id}"
        return f"Late lottery start behind the watermark, lotteryId: {lottery_id}"
    raise ValueError(f"unknown rule {rule!r}")


def order_key(t_us: int, event_type: str, event_id: str) -> tuple:
    """The order every rule is applied in: event time, then type, then event id."""
    return t_us, RANK[event_type], event_id


def window_start(t_us: int) -> int:
    return t_us - t_us % WINDOW_US


def draw(seed: int, lottery_id: int, window_start_us: int,
         entrants: list[tuple[int, str, int]]) -> tuple[int, str, int]:
    """The winner among (t_us, event_id, user_id) entrants: sha256 of (seed, lottery, window)
    indexes the entrants sorted by (event time, event id). Same events and seed, same winner,
    whatever the order the entrants arrived in or how often the window is replayed."""
    ordered = sorted(entrants)
    digest = hashlib.sha256(f"{seed}/{lottery_id}/{window_start_us}".encode()).digest()
    return ordered[int.from_bytes(digest[:8], "big") % len(ordered)]


# --- Settings --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    seed: int              # $LOTTERY_SEED: the draw's seed
    watermark_delay_ms: int  # $LOTTERY_WATERMARK_DELAY: how far behind the newest event time the watermark trails


DEFAULT_SEED, DEFAULT_DELAY = 42, "10 seconds"


def settings() -> Settings:
    """The job's settings from the environment (read on the driver, when the query is built)."""
    seed = os.environ.get("LOTTERY_SEED", str(DEFAULT_SEED))
    try:
        seed_value = int(seed)
    except ValueError:
        raise ValueError(f"LOTTERY_SEED={seed!r} is not an integer") from None
    delay = os.environ.get("LOTTERY_WATERMARK_DELAY", DEFAULT_DELAY)
    return Settings(seed_value, duration_ms(delay, "LOTTERY_WATERMARK_DELAY"))
