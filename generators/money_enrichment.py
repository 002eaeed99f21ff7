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
import heapq
import itertools
import random
import sys
from array import array
from collections.abc import Callable, Iterator
from datetime import timedelta

from faker import Faker

from jobs.money_enrichment.job import INPUT_TOPICS, SESSIONS, SESSIONS_TOPIC, TRANSACTIONS, TRANSACTIONS_TOPIC, USERS, USERS_TOPIC
from jobs.money_enrichment.rules import TYPES
from joinlab.generate import (START, Disorder, Event, Record, Records, add_generator_args, arrange, arranged,
                              check_generator_args, disorder_from_args, fraction, iso, positive, produce,
                              sample_indices)

SCHEMAS = {TRANSACTIONS_TOPIC: TRANSACTIONS, SESSIONS_TOPIC: SESSIONS, USERS_TOPIC: USERS}
DEFAULT_RATE = 20.0       # events per second of event time
UPDATE_SHARE = 0.05       # user updates, as a share of all events (at least the 3 planted ones)
FIRST_TX_WITHIN_MS = 2000  # a before-session session's first transaction, so it still arrives in time
COUNTRIES = ("PL", "DE", "FR", "GB", "US", "ES", "IT", "NL")
CURRENCIES = ("EUR", "USD", "GBP", "PLN")
SEGMENTS = ("retail", "premium", "business", "student")
DEVICES = ("ios", "android", "web")
USER, SESSION, TX = 0, 1, 2  # the order of events planned for one millisecond


def _sizes(count: int, users: int) -> tuple[int, int]:
    """(user updates, sessions and their transactions), checked."""
    n_updates = max(3, round(UPDATE_SHARE * count))
    rest = count - users - n_updates  # sessions and their transactions
    if users < 1 or rest < 3:
        raise ValueError(f"count ({count}) is too small for {users} users and {n_updates} user updates "
                         f"(needs at least users + {n_updates + 3})")
    return n_updates, rest


def _plan(rng: random.Random, count: int, users: int, session_ms: int, before_session: float, very_late: float,
          late_ms: int, rate: float) -> Iterator[tuple[int, int, tuple | int]]:
    """(ms, kind, detail) in event-time order; detail: a user, (session, user, arrival delay, transactions)
    or (session, user, type, arrival delay).
    Drawn all at once (an update may come anywhere in the run), kept compactly (arrays, some bytes an event);
    made in order by merging the users' updates, the sessions and their transactions."""
    n_updates, rest = _sizes(count, users)
    sizes, left = array("b"), rest  # transactions per session; the first has two at least, so a same-type pair fits
    while left > 0:
        sizes.append(max(0 if sizes else 2, min(rng.randint(1, 5), left - 1)))
        left -= sizes[-1] + 1
    with_tx = array("q", (j for j, k in enumerate(sizes) if k))
    starts_late = bytearray(len(sizes))  # by session
    for p in sample_indices(rng, len(with_tx), round(before_session * len(with_tx))):
        starts_late[with_tx[p]] = 1
    del with_tx
    nth = rng.choice(range(sum(k >= 2 for k in sizes)))  # of the sessions with two transactions or more
    twins = next(itertools.islice((j for j, k in enumerate(sizes) if k >= 2), nth, None))
    span_ms, done = 1000 * count / rate, 0
    starts, owners, delays = array("q"), array("q"), array("d")  # by session
    tx_ms, tx_types = array("q"), bytearray()  # by transaction, session after session
    for j, k in enumerate(sizes):  # sessions start paced through the span, in order
        start, user = round(span_ms * done / rest), rng.randrange(users)
        offsets, types = sorted(rng.randrange(session_ms) for _ in range(k)), [rng.choice(TYPES) for _ in range(k)]
        delay = 0.0
        if starts_late[j]:  # its first transaction early on; SessionStarted arrives 0.1..3 s after it
            offsets[0] = rng.randrange(min(FIRST_TX_WITHIN_MS, session_ms))
            offsets.sort()
            delay = offsets[0] / 1000 + rng.uniform(0.1, 3.0)
        if j == twins:  # two transactions of one user and type in one millisecond
            offsets[1], types[1] = offsets[0], types[0]
        starts.append(start)
        owners.append(user)
        delays.append(delay)
        tx_ms.extend(start + offset for offset in offsets)
        tx_types.extend(TYPES.index(kind) for kind in types)
        done += k + 1
    firsts = array("q", itertools.accumulate(sizes[:-1], initial=0))  # each session's first transaction
    last_ms = max(tx_ms)
    paired = rng.choice(range(len(tx_ms)))  # a user update in the very millisecond of one of that user's transactions
    paired_user = owners[next(j for j, first in enumerate(firsts) if first <= paired < first + sizes[j])]
    double_user, double_at = rng.randrange(users), rng.randint(1, max(1, round(span_ms)))
    update_ms = array("q", [0] * users + [tx_ms[paired], double_at, double_at])
    updated = array("q", [*range(users), paired_user, double_user, double_user])
    for _ in range(n_updates - 3):
        update_ms.append(rng.randint(1, max(1, last_ms)))
        updated.append(rng.randrange(users))
    # Very late: only transactions late_by before the span's end, so the full-rate stream outruns them.
    candidates = array("q", (tx for j, first in enumerate(firsts) if not starts_late[j] and j != twins
                             for tx in range(first, first + sizes[j])
                             if tx != paired and tx_ms[tx] + late_ms <= span_ms))
    very = bytearray(len(tx_ms))  # by transaction
    for p in sample_indices(rng, len(candidates), min(len(candidates), round(very_late * len(tx_ms)))):
        very[candidates[p]] = 1
    del candidates

    def users_in_order() -> Iterator[tuple]:
        order = array("q", sorted(range(len(update_ms)), key=update_ms.__getitem__))  # stable
        return ((update_ms[q], USER, q, updated[q]) for q in order)

    def sessions_in_order() -> Iterator[tuple]:  # sessions start in order
        return ((starts[j], SESSION, j, (j, owners[j], delays[j], sizes[j])) for j in range(len(sizes)))

    def transactions_in_order() -> Iterator[tuple]:  # each waits until no session still to come starts before it
        waiting: list[tuple[int, int, tuple]] = []
        for j, first in enumerate(firsts):
            while waiting and waiting[0][0] <= starts[j]:
                ms, tx, detail = heapq.heappop(waiting)
                yield ms, TX, tx, detail
            for tx in range(first, first + sizes[j]):
                delay = late_ms / 1000 if very[tx] else 0.0
                heapq.heappush(waiting, (tx_ms[tx], tx, (j, owners[j], TYPES[tx_types[tx]], delay)))
        while waiting:
            ms, tx, detail = heapq.heappop(waiting)
            yield ms, TX, tx, detail

    # One sort of users, sessions and transactions by (ms, kind, position), as a merge: same ms, users, sessions, txs
    for ms, kind, _, detail in heapq.merge(users_in_order(), sessions_in_order(), transactions_in_order()):
        yield ms, kind, detail


def _events(seed: int, count: int, users: int, session_ms: int, before_session: float, very_late: float,
            late_ms: int, rate: float) -> Iterator[Event]:
    """The events in event-time order, made one by one; what is kept is per user and per open session."""
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    plan = _plan(rng, count, users, session_ms, before_session, very_late, late_ms, rate)
    profiles: dict[int, dict] = {}
    session_ids: dict[int, list] = {}  # the sessions open: session -> [its id, its transactions still to come]
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
            yield Event(USERS_TOPIC, detail + 1, {**profile, "event_time": iso(at)}, at)
        elif kind == SESSION:
            j, user, delay, transactions = detail
            session_id = fake.uuid4()
            if transactions:
                session_ids[j] = [session_id, transactions]
            country = profiles[user]["country"] if rng.random() < 0.9 else rng.choice(COUNTRIES)
            body = {"session_id": session_id, "user_id": user + 1, "country": country,
                    "device": rng.choice(DEVICES), "event_time": iso(at)}
            yield Event(SESSIONS_TOPIC, session_id, body, at, delay)
        else:
            j, user, tx_type, delay = detail
            amount = round(max(0.01, rng.lognormvariate(3.5, 1.2)), 2)
            session = session_ids[j]
            body = {"tx_id": fake.uuid4(), "user_id": user + 1, "session_id": session[0], "amount": amount,
                    "currency": rng.choice(CURRENCIES), "type": tx_type, "event_time": iso(at)}
            session[1] -= 1
            if not session[1]:
                del session_ids[j]
            yield Event(TRANSACTIONS_TOPIC, body["tx_id"], body, at, delay)


def _made(seed: int, count: int, users: int | None, session_seconds: float, before_session: float,
          very_late: float, late_by_s: float, rate: float) -> Callable[[], Iterator[Event]]:
    """The events' maker, its arguments checked (and the defaults filled in)."""
    users = max(5, count // 100) if users is None else users
    for name, value in (("before_session", before_session), ("very_late", very_late)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a fraction between 0 and 1, got {value}")
    if rate <= 0 or session_seconds < 0.001 or late_by_s <= 0:
        raise ValueError(f"rate, session_seconds and late_by_s must be > 0 (session at least 1 ms), got "
                         f"{rate}, {session_seconds} and {late_by_s}")
    _sizes(count, users)
    return lambda: _events(seed, count, users, round(session_seconds * 1000), before_session, very_late,
                           round(late_by_s * 1000), rate)


def stream(seed: int, count: int, *, users: int | None = None, session_seconds: float = 120.0,
           before_session: float = 0.1, very_late: float = 0.02, late_by_s: float = 200.0,
           disorder: Disorder = Disorder(), rate: float = DEFAULT_RATE) -> Records:
    """`generate`'s records, the same ones in the same order, made as they are iterated (what the CLI
    sends: its memory does not grow with the run; joinlab.generate.arranged)."""
    events = _made(seed, count, users, session_seconds, before_session, very_late, late_by_s, rate)
    return arranged(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS, count=count)


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
    events = _made(seed, count, users, session_seconds, before_session, very_late, late_by_s, rate)
    return arrange(list(events()), disorder, random.Random(f"{seed}/arrange"), SCHEMAS)


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
        records = stream(args.seed, args.count, users=args.users, session_seconds=args.session_seconds,
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
