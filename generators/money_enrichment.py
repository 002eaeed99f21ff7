"""Users, sessions and transactions for the money-enrichment join (contract: jobs/money_enrichment/job.py).

Why this shape: each transaction must get its session and its user as of its own time, be
deduplicated, and be flagged when it is the user's first of its type, so the event-time story
holds every case the original job got wrong or the stream must survive: a user update in the
very millisecond of one of that user's transactions (applies: "at", not "before"), two updates of
one user in one millisecond (versions v and v+1, both kept, the higher wins), two transactions of
one user and type in one millisecond (first by tx_id), sessions whose SessionStarted arrives a
little after their first transactions (0.1..3 s: within the wait limit and the watermark delay),
and very late transactions (`late_by_s` after their time: their session's state is long gone, so
the lookup service must enrich them). Every user has version 1 at the start; a session's
transactions fall in [start, start + session_seconds). Ids are Faker UUIDs from the seed (users
are 1..n); each topic is keyed by its id.

    python -m generators.money_enrichment --count 20000 --before-session 0.1 --very-late 0.02 --late-by 200
"""
from __future__ import annotations

import argparse
import random
import sys
from datetime import timedelta

from faker import Faker

from jobs.money_enrichment.job import (INPUT_TOPICS, SESSIONS, SESSIONS_TOPIC, TRANSACTIONS, TRANSACTIONS_TOPIC, USERS,
                                       USERS_TOPIC)
from jobs.money_enrichment.rules import TYPES
from joinlab.generate import (START, Disorder, Event, Record, add_generator_args, arrange, check_generator_args,
                              disorder_from_args, fraction, iso, positive, produce)

SCHEMAS = {TRANSACTIONS_TOPIC: TRANSACTIONS, SESSIONS_TOPIC: SESSIONS, USERS_TOPIC: USERS}
DEFAULT_RATE = 20.0       # events per second of event time
UPDATE_SHARE = 0.05       # user updates, as a share of all events (at least the 3 planted ones)
FIRST_TX_WITHIN_MS = 2000  # a before-session session's first transaction, so it still arrives in time
COUNTRIES = ("PL", "DE", "FR", "GB", "US", "ES", "IT", "NL")
CURRENCIES = ("EUR", "USD", "GBP", "PLN")
SEGMENTS = ("retail", "premium", "business", "student")
DEVICES = ("ios", "android", "web")
USER, SESSION, TX = 0, 1, 2  # the order of events planned for one millisecond


def _plan(rng: random.Random, count: int, users: int, session_ms: int, before_session: float, very_late: float,
          late_ms: int, rate: float) -> list[list]:
    """[ms, kind, detail] in event-time order; detail: a user, or (session, user, [type,] arrival delay)."""
    n_updates = max(3, round(UPDATE_SHARE * count))
    rest = count - users - n_updates  # sessions and their transactions
    if users < 1 or rest < 3:
        raise ValueError(f"count ({count}) is too small for {users} users and {n_updates} user updates "
                         f"(needs at least users + {n_updates + 3})")
    sizes, left = [], rest  # transactions per session; the first has two at least, so a same-type pair fits
    while left > 0:
        sizes.append(max(0 if sizes else 2, min(rng.randint(1, 5), left - 1)))
        left -= sizes[-1] + 1
    with_tx = [j for j, k in enumerate(sizes) if k]
    starts_late = set(rng.sample(with_tx, round(before_session * len(with_tx))))
    twins = rng.choice([j for j, k in enumerate(sizes) if k >= 2])
    span_ms, done, sessions, txs = 1000 * count / rate, 0, [], []
    for j, k in enumerate(sizes):  # sessions start paced through the span, in order
        start, user = round(span_ms * done / rest), rng.randrange(users)
        offsets, types = sorted(rng.randrange(session_ms) for _ in range(k)), [rng.choice(TYPES) for _ in range(k)]
        delay = 0.0
        if j in starts_late:  # its first transaction early on; SessionStarted arrives 0.1..3 s after it
            offsets[0] = rng.randrange(min(FIRST_TX_WITHIN_MS, session_ms))
            offsets.sort()
            delay = offsets[0] / 1000 + rng.uniform(0.1, 3.0)
        if j == twins:  # two transactions of one user and type in one millisecond
            offsets[1], types[1] = offsets[0], types[0]
        sessions.append([start, SESSION, (j, user, delay)])
        txs += [[start + offset, TX, (j, user, kind, 0.0)] for offset, kind in zip(offsets, types)]
        done += k + 1
    last_ms = max(tx[0] for tx in txs)
    paired = rng.choice(txs)  # a user update in the very millisecond of one of that user's transactions
    double_user, double_at = rng.randrange(users), rng.randint(1, max(1, round(span_ms)))
    updates = [(0, u) for u in range(users)] + [(paired[0], paired[2][1])] + [(double_at, double_user)] * 2
    updates += [(rng.randint(1, max(1, last_ms)), rng.randrange(users)) for _ in range(n_updates - 3)]
    # Very late: only transactions late_by before the span's end, so the full-rate stream outruns them.
    candidates = [tx for tx in txs if tx is not paired and tx[2][0] not in starts_late and tx[2][0] != twins
                  and tx[0] + late_ms <= span_ms]
    for tx in rng.sample(candidates, min(len(candidates), round(very_late * len(txs)))):
        tx[2] = (*tx[2][:3], late_ms / 1000)
    plan = sessions + txs + [[at, USER, u] for at, u in updates]
    order = sorted(range(len(plan)), key=lambda i: (plan[i][0], plan[i][1], i))  # same ms: users, sessions, txs
    return [plan[i] for i in order]


def _events(seed: int, count: int, users: int, session_ms: int, before_session: float, very_late: float,
            late_ms: int, rate: float) -> list[Event]:
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    plan = _plan(rng, count, users, session_ms, before_session, very_late, late_ms, rate)
    profiles: dict[int, dict] = {}
    session_ids: dict[int, str] = {}
    events = []
    for ms, kind, detail in plan:
        at = START + timedelta(milliseconds=ms)
        if kind == USER:
            profile = profiles.get(detail)
            if profile is None:
                profile = profiles[detail] = {"user_id": detail + 1, "name": fake.name(),
                                              "country": rng.choice(COUNTRIES), "segment": rng.choice(SEGMENTS),
                                              "version": 0}
            else:  # every update changes one thing
                field = rng.choice(("segment", "segment", "country", "name"))
                choices = {"segment": SEGMENTS, "country": COUNTRIES}.get(field)
                profile[field] = (rng.choice([c for c in choices if c != profile[field]]) if choices
                                  else fake.name())
            profile["version"] += 1
            events.append(Event(USERS_TOPIC, detail + 1, {**profile, "event_time": iso(at)}, at))
        elif kind == SESSION:
            j, user, delay = detail
            session_ids[j] = fake.uuid4()
            country = profiles[user]["country"] if rng.random() < 0.9 else rng.choice(COUNTRIES)
            body = {"session_id": session_ids[j], "user_id": user + 1, "country": country,
                    "device": rng.choice(DEVICES), "event_time": iso(at)}
            events.append(Event(SESSIONS_TOPIC, session_ids[j], body, at, delay))
        else:
            j, user, tx_type, delay = detail
            amount = round(max(0.01, rng.lognormvariate(3.5, 1.2)), 2)
            body = {"tx_id": fake.uuid4(), "user_id": user + 1, "session_id": session_ids[j], "amount": amount,
                    "currency": rng.choice(CURRENCIES), "type": tx_type, "event_time": iso(at)}
            events.append(Event(TRANSACTIONS_TOPIC, body["tx_id"], body, at, delay))
    return events


def generate(seed: int, count: int, *, users: int | None = None, session_seconds: float = 120.0,
             before_session: float = 0.1, very_late: float = 0.02, late_by_s: float = 200.0,
             disorder: Disorder = Disorder(), rate: float = DEFAULT_RATE) -> list[Record]:
    """The records to produce, in arrival order; `count` is the number of valid events of all kinds.

    users (default count / 100, at least 5) get ~5% of the events as updates; sessions have 1..5
    transactions in their first `session_seconds`; before_session: share of sessions whose start
    arrives after their first transaction; very_late: share of transactions that arrive late_by_s
    after their time - only ones at least late_by_s before count / rate, so with count < rate *
    late_by_s there are none; rate: events per second of event time (sessions start through
    count / rate seconds, their transactions trail by up to session_seconds).
    """
    users = max(5, count // 100) if users is None else users
    for name, value in (("before_session", before_session), ("very_late", very_late)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a fraction between 0 and 1, got {value}")
    if rate <= 0 or session_seconds < 0.001 or late_by_s <= 0:
        raise ValueError(f"rate, session_seconds and late_by_s must be > 0 (session at least 1 ms), got "
                         f"{rate}, {session_seconds} and {late_by_s}")
    events = _events(seed, count, users, round(session_seconds * 1000), before_session, very_late,
                     round(late_by_s * 1000), rate)
    return arrange(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m generators.money_enrichment",
                                     description="Produce seeded users, sessions and transactions for money enrichment.")
    add_generator_args(parser)
    g = parser.add_argument_group("money-enrichment options")
    g.add_argument("--users", type=positive(int), help="number of users (default: count / 100, at least 5)")
    g.add_argument("--session-seconds", type=positive(float), default=120.0,
                   help="how long a session takes transactions, as the job's MONEY_SESSION_DURATION (default 120)")
    g.add_argument("--before-session", type=fraction, default=0.1,
                   help="share of sessions whose start arrives 0.1..3 s after their first transaction (default 0.1)")
    g.add_argument("--very-late", type=fraction, default=0.02,
                   help="share of transactions that arrive --late-by seconds after their time (default 0.02)")
    g.add_argument("--late-by", type=positive(float), default=200.0,
                   help="how late a very late transaction arrives, seconds of event time (default 200: "
                        "past the session's 120 s + the watermark's 10 s)")
    args = parser.parse_args(argv)
    check_generator_args(parser, args)
    try:
        records = generate(args.seed, args.count, users=args.users, session_seconds=args.session_seconds,
                           before_session=args.before_session, very_late=args.very_late, late_by_s=args.late_by,
                           disorder=disorder_from_args(args), rate=args.rate or DEFAULT_RATE)
    except ValueError as exc:
        parser.error(f"{exc}; raise --count or lower --users (or fix the money-enrichment options)")
    if args.very_late and args.count / (args.rate or DEFAULT_RATE) <= args.late_by:
        print(f"note: {args.count} events span too little event time for transactions {args.late_by:g} s late; "
              "none are very late (raise --count or lower --late-by)", file=sys.stderr)
    produce("money-enrichment", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
