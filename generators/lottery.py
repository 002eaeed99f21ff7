"""Lottery starts, coupon purchases and clicks for the lottery pattern (contract: jobs/lottery/job.py).

Why this shape: every rule must be exercised, so the generator plays the lottery forward in
event-time order (which lotteries have started, how many coupons each user holds) and aims a
share of clicks at lotteries that have not started and at users without a coupon, sends some
zero or negative purchases and some second starts. Everything else is an accepted click, so the
windows have entrants. Event ids are Faker UUIDs from the seed; lottery events are keyed by
lottery id, user events by user id.

    python -m generators.lottery --count 2000 --lotteries 4 --users 60 --delayed 0.3 --max-delay 5
"""
from __future__ import annotations

import argparse
import random
from array import array
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from faker import Faker

from jobs.lottery.job import INPUT_TOPICS, LOTTERY_EVENTS, LOTTERY_TOPIC, USER_EVENTS, USER_TOPIC
from jobs.lottery.rules import BOUGHT, CLICKED, STARTED
from joinlab.generate import (START, Disorder, Event, Record, Records, add_generator_args, arrange, arranged,
                              check_generator_args, disorder_from_args, iso, produce)

SCHEMAS = {LOTTERY_TOPIC: LOTTERY_EVENTS, USER_TOPIC: USER_EVENTS}
DEFAULT_RATE = 20.0  # events per second of event time: 200 events per 10-second window


class _Holders:
    """Users 1..n by whether they hold a coupon: how many do or do not, and the r-th of either in user
    order, in O(log n) (a Fenwick tree over "holds none"), not by listing all users at every click."""

    def __init__(self, users: int):
        self.users, self.none = users, users  # nobody holds a coupon yet
        self.tree = array("q", (i & -i for i in range(users + 1)))  # node i counts (i - lowbit(i), i]
        self.top = 1 << (users.bit_length() - 1) if users else 0

    def count(self, holding: bool) -> int:
        return self.users - self.none if holding else self.none

    def change(self, user: int, holding: bool) -> None:
        """`user` now holds coupons (or no longer does)."""
        delta = -1 if holding else 1
        self.none += delta
        while user <= self.users:
            self.tree[user] += delta
            user += user & -user

    def nth(self, r: int, holding: bool) -> int:
        """The user at index r (from 0) of those who hold coupons (or do not), in user order."""
        pos, left, step = 0, r + 1, self.top
        while step:
            if pos + step <= self.users:  # node pos + step spans `step` users
                here = step - self.tree[pos + step] if holding else self.tree[pos + step]
                if here < left:
                    pos, left = pos + step, left - here
            step >>= 1
        return pos + 1


class _Play:
    """The lottery as the rules see it, advanced one event at a time in event-time order."""

    def __init__(self, rng: random.Random, fake: Faker, lotteries: int, users: int):
        self.rng, self.fake = rng, fake
        self.lotteries, self.users = lotteries, users
        self.started: set[int] = set()
        self.coupons = array("q", bytes(8 * (users + 1)))  # by user (1..users)
        self.holders = _Holders(users)

    def _event(self, topic: str, key: int, at: datetime, **fields) -> Event:
        body = {"event_id": self.fake.uuid4(), **fields, "event_time": iso(at)}
        return Event(topic, key, body, at)

    def start(self, lottery: int, at: datetime) -> Event:
        self.started.add(lottery)
        return self._event(LOTTERY_TOPIC, lottery, at, type=STARTED, lottery_id=lottery)

    def restart(self, at: datetime) -> Event | None:
        """A second start of a started lottery (to be rejected); None before any lottery started."""
        if not self.started:
            return None
        lottery = self.rng.choice(sorted(self.started))
        return self._event(LOTTERY_TOPIC, lottery, at, type=STARTED, lottery_id=lottery)

    def buy(self, at: datetime, bad: bool) -> Event:
        user = self.rng.randint(1, self.users)
        amount = self.rng.choice([0, -1, -self.rng.randint(2, 5)]) if bad else self.rng.randint(1, 3)
        if amount > 0:
            if not self.coupons[user]:
                self.holders.change(user, holding=True)
            self.coupons[user] += amount
        return self._event(USER_TOPIC, user, at, type=BOUGHT, user_id=user, amount=amount)

    def click(self, at: datetime, aim: str) -> Event | None:
        """A click of kind `aim` ("inactive", "no-coupon" or "ok"); None when no user could make it."""
        rng = self.rng
        if aim == "inactive":
            waiting = [n for n in range(1, self.lotteries + 1) if n not in self.started]
            lottery = rng.choice(waiting) if waiting else self.lotteries + rng.randint(1, 2)  # never started
            user = rng.randint(1, self.users)
        else:  # a user drawn from those with coupons (or without), in user order
            holding = aim != "no-coupon"
            pool = self.holders.count(holding)
            if not pool or not self.started:
                return None
            lottery, user = rng.choice(sorted(self.started)), self.holders.nth(rng.choice(range(pool)), holding)
            if aim == "ok":
                self.coupons[user] -= 1
                if not self.coupons[user]:
                    self.holders.change(user, holding=False)
        return self._event(USER_TOPIC, user, at, type=CLICKED, user_id=user, lottery_id=lottery)


def _check(count: int, lotteries: int, users: int, shares: dict[str, float]) -> None:
    if count < lotteries:
        raise ValueError(f"count ({count}) must be at least the number of lotteries ({lotteries})")
    if lotteries < 1 or users < 1:
        raise ValueError(f"lotteries and users must be >= 1, got {lotteries} and {users}")
    for name, value in shares.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a fraction between 0 and 1, got {value}")
    if shares["unstarted"] + shares["no_coupon"] > 1.0:
        raise ValueError("unstarted + no_coupon must not exceed 1 (they are shares of the clicks)")


def _events(seed: int, count: int, lotteries: int, users: int, weights: list[float], unstarted: float,
            no_coupon: float, bad_amounts: float, rate: float) -> Iterator[Event]:
    """The events in event-time order, made one by one; what is kept is per user and per lottery."""
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    play = _Play(rng, fake, lotteries, users)
    order = list(range(1, lotteries + 1))
    rng.shuffle(order)
    # Lotteries start at random moments in the first quarter; clicks before that hit inactive ones.
    starts = dict(zip(sorted(rng.sample(range(max(lotteries, count // 4)), lotteries)), order))
    for i in range(count):
        at = START + timedelta(seconds=i / rate)
        if i in starts:
            yield play.start(starts[i], at)
            continue
        kind = rng.choices(["click", "purchase", "restart"], weights)[0]
        event = None
        if kind == "restart":
            event = play.restart(at)
        elif kind == "click":
            roll = rng.random()
            event = play.click(at, "inactive" if roll < unstarted else "no-coupon" if roll < unstarted + no_coupon
                               else "ok")
        yield event or play.buy(at, bad=rng.random() < bad_amounts)  # a purchase when nothing else fits


def _made(seed: int, count: int, lotteries: int | None, users: int | None, clicks: float, purchases: float,
          restarts: float, unstarted: float, no_coupon: float, bad_amounts: float,
          rate: float) -> Callable[[], Iterator[Event]]:
    """The events' maker, its arguments checked (and the defaults filled in)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    lotteries = max(2, min(20, count // 500)) if lotteries is None else lotteries
    users = max(5, count // 25) if users is None else users
    _check(count, lotteries, users, {"clicks": clicks, "purchases": purchases, "restarts": restarts,
                                     "unstarted": unstarted, "no_coupon": no_coupon, "bad_amounts": bad_amounts})
    weights = [clicks, purchases, restarts]
    if sum(weights) <= 0:
        raise ValueError("clicks, purchases and restarts can't all be 0")
    return lambda: _events(seed, count, lotteries, users, weights, unstarted, no_coupon, bad_amounts, rate)


def stream(seed: int, count: int, *, lotteries: int | None = None, users: int | None = None,
           clicks: float = 0.72, purchases: float = 0.25, restarts: float = 0.01, unstarted: float = 0.05,
           no_coupon: float = 0.05, bad_amounts: float = 0.05, disorder: Disorder = Disorder(),
           rate: float = DEFAULT_RATE) -> Records:
    """`generate`'s records, the same ones in the same order, made as they are iterated (what the CLI
    sends: its memory does not grow with the run; joinlab.generate.arranged)."""
    events = _made(seed, count, lotteries, users, clicks, purchases, restarts, unstarted, no_coupon, bad_amounts, rate)
    return arranged(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS, count=count)


def generate(seed: int, count: int, *, lotteries: int | None = None, users: int | None = None,
             clicks: float = 0.72, purchases: float = 0.25, restarts: float = 0.01, unstarted: float = 0.05,
             no_coupon: float = 0.05, bad_amounts: float = 0.05, disorder: Disorder = Disorder(),
             rate: float = DEFAULT_RATE) -> list[Record]:
    """The records to produce, in arrival order; `count` is the number of valid events.

    lotteries (default count / 500, 2 to 20) and users (default count / 25, at least 5);
    clicks, purchases, restarts: relative weights of the event kinds after the starts (a click is
    replaced by a purchase when no user can make it); unstarted and no_coupon: shares of clicks
    aimed at a lottery that has not started and at a user without a coupon; bad_amounts: share of
    purchases with amount 0 or below; rate: events per second of event time.
    """
    events = _made(seed, count, lotteries, users, clicks, purchases, restarts, unstarted, no_coupon, bad_amounts, rate)
    return arrange(list(events()), disorder, random.Random(f"{seed}/arrange"), SCHEMAS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m generators.lottery",
                                     description="Produce seeded lottery starts, coupon purchases and clicks.")
    add_generator_args(parser)
    g = parser.add_argument_group("lottery options")
    g.add_argument("--lotteries", type=int, help="number of lotteries (default: count / 500, 2 to 20)")
    g.add_argument("--users", type=int, help="number of users (default: count / 25, at least 5)")
    g.add_argument("--clicks", type=float, default=0.72, help="relative weight of clicks (default 0.72)")
    g.add_argument("--purchases", type=float, default=0.25, help="relative weight of coupon purchases (default 0.25)")
    g.add_argument("--restarts", type=float, default=0.01,
                   help="relative weight of second starts of a started lottery (default 0.01)")
    g.add_argument("--unstarted", type=float, default=0.05,
                   help="share of clicks on a lottery not started (default 0.05)")
    g.add_argument("--no-coupon", type=float, default=0.05,
                   help="share of clicks by a user without a coupon (default 0.05)")
    g.add_argument("--bad-amounts", type=float, default=0.05,
                   help="share of purchases of zero or fewer coupons (default 0.05)")
    args = parser.parse_args(argv)
    check_generator_args(parser, args)
    try:
        records = stream(args.seed, args.count, lotteries=args.lotteries, users=args.users, clicks=args.clicks,
                         purchases=args.purchases, restarts=args.restarts, unstarted=args.unstarted,
                         no_coupon=args.no_coupon, bad_amounts=args.bad_amounts, disorder=disorder_from_args(args),
                         rate=args.rate or DEFAULT_RATE)
    except ValueError as exc:
        parser.error(f"{exc}; adjust the lottery options or raise --count")
    produce("lottery", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
