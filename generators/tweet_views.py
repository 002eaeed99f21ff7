"""Users and tweets for the tweet-views join (contract: jobs/tweet_views/job.py).

Why this shape: the join must give every tweet the latest profile of its author whatever the
arrival order, so the event-time story has every kind of change it must survive: a user exists
before their tweets, tweets get edited (new version, same author), profiles change after the
user's tweets (so views must be re-emitted), and `tweets_first` makes every tweet arrive before
any user. Every tweet's author exists; versions per entity are 1..n in event-time order.

    python -m generators.tweet_views --count 1000 --delayed 0.3 --max-delay 5 --malformed 0.01
"""
from __future__ import annotations

import argparse
import heapq
import random
from array import array
from collections.abc import Iterator, Sequence
from datetime import timedelta

from faker import Faker

from jobs.tweet_views.job import INPUT_TOPICS, TWEETS, TWEETS_TOPIC, USERS, USERS_TOPIC
from joinlab.generate import (START, Disorder, Event, Record, Records, add_generator_args, arrange, arranged,
                              arrive_first, check_generator_args, disorder_from_args, iso, produce)

SCHEMAS = {USERS_TOPIC: USERS, TWEETS_TOPIC: TWEETS}
FIRST_USER_ID, FIRST_TWEET_ID = 1_001, 7_000_000_001  # disjoint, so a join on the wrong id finds nothing


def _plan(rng: random.Random, users: int, tweets: int, edits: int,
          updates: int) -> tuple[Iterator[tuple[str, int]], array]:
    """((kind, entity) in event-time order, each tweet's author): a user before their tweets,
    edits after the tweet, profile updates after all of the user's tweet versions. Drawn all at once
    (an edit may trail its tweet by a twentieth of the run), kept compactly (arrays, some bytes a step)."""
    spread = max(1.0, tweets / 20)  # how far (in tweet slots) an edit or update may trail
    authors = array("q", (rng.randrange(users) for _ in range(tweets)))
    created = array("d", (rng.uniform(0, max(tweets, 1)) for _ in range(users)))  # for users who never tweet
    last = array("d", created)
    for t, u in enumerate(authors):
        created[u] = min(created[u], t - 0.5)
        last[u] = max(last[u], t)
    edited, edit_when = array("q"), array("d")
    for _ in range(edits):
        t = rng.randrange(tweets)
        when = t + spread * (1.0 - rng.random())
        edited.append(t)
        edit_when.append(when)
        last[authors[t]] = max(last[authors[t]], when)
    updated, update_when = array("q"), array("d")
    for _ in range(updates):
        u = rng.randrange(users)
        updated.append(u)
        update_when.append(last[u] + spread * (1.0 - rng.random()))
    del last

    def steps(group: int, kind: str, when: Sequence[float], entity: Sequence[int]) -> Iterator[tuple]:
        order = array("q", sorted(range(len(when)), key=when.__getitem__))  # stable: a tie keeps the order above
        return ((when[p], group, p, kind, entity[p]) for p in order)

    # One stable sort of tweets, users, edits and updates by time, as a merge by (time, group, position)
    merged = heapq.merge(((float(t), 0, t, "tweet", t) for t in range(tweets)),
                         steps(1, "user", created, range(users)), steps(2, "edit", edit_when, edited),
                         steps(3, "update", update_when, updated))
    return ((kind, entity) for *_, kind, entity in merged), authors


def _sentence(rng: random.Random, vocabulary: list[str]) -> str:
    return " ".join(rng.choices(vocabulary, k=rng.randint(4, 16))).capitalize() + "."


def _sizes(count: int, users: int | None, user_updates: float, tweet_edits: float) -> tuple[int, int, int, int]:
    """(users, tweets, edits, updates), checked."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not (0 <= user_updates and 0 <= tweet_edits):
        raise ValueError("user_updates and tweet_edits must be >= 0")
    n_users = max(1, count // 10) if users is None else users
    if not 1 <= n_users <= count:
        raise ValueError(f"users must be between 1 and count ({count}), got {n_users}")
    n_tweets = max(0, round((count - n_users * (1 + user_updates)) / (1 + tweet_edits)))
    return n_users, n_tweets, round(tweet_edits * n_tweets), round(user_updates * n_users)


def _events(seed: int, sizes: tuple[int, int, int, int], rate: float) -> Iterator[Event]:
    """The events in event-time order, made one by one (`_plan` first)."""
    n_users, n_tweets, edits, updates = sizes
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    vocabulary = fake.get_words_list()  # Faker's words; sentences built with rng (fake.sentence is ~10x slower)
    plan, authors = _plan(rng, n_users, n_tweets, edits, updates)
    versions = {"u": array("q", bytes(8 * n_users)), "t": array("q", bytes(8 * n_tweets))}  # by entity
    for i, (kind, entity) in enumerate(plan):
        at = START + timedelta(seconds=i / rate)
        if kind in ("user", "update"):
            user_id = FIRST_USER_ID + entity
            versions["u"][entity] += 1
            body = {"user_id": user_id, "name": fake.name(), "handle": fake.user_name(),
                    "version": versions["u"][entity], "event_time": iso(at)}
            yield Event(USERS_TOPIC, user_id, body, at)
        else:
            tweet_id = FIRST_TWEET_ID + entity
            versions["t"][entity] += 1
            body = {"tweet_id": tweet_id, "user_id": FIRST_USER_ID + authors[entity],
                    "text": _sentence(rng, vocabulary), "version": versions["t"][entity], "event_time": iso(at)}
            yield Event(TWEETS_TOPIC, tweet_id, body, at)


def stream(seed: int, count: int, *, users: int | None = None, user_updates: float = 0.2,
           tweet_edits: float = 0.1, tweets_first: bool = False, disorder: Disorder = Disorder(),
           rate: float = 1000.0) -> Records:
    """`generate`'s records, the same ones in the same order, made as they are iterated (what the CLI
    sends: its memory does not grow with the run; joinlab.generate.arranged)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    sizes = _sizes(count, users, user_updates, tweet_edits)
    records = arranged(lambda: _events(seed, sizes, rate), disorder, random.Random(f"{seed}/arrange"), SCHEMAS,
                       count=sum(sizes))
    return arrive_first(records, [TWEETS_TOPIC]) if tweets_first else records


def generate(seed: int, count: int, *, users: int | None = None, user_updates: float = 0.2,
             tweet_edits: float = 0.1, tweets_first: bool = False, disorder: Disorder = Disorder(),
             rate: float = 1000.0) -> list[Record]:
    """The records to produce, in arrival order; `count` is the approximate number of valid events.

    users: distinct users (default count // 10); user_updates / tweet_edits: updates per user and
    edits per tweet, as fractions; rate: events per second of event time.
    """
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    events = list(_events(seed, _sizes(count, users, user_updates, tweet_edits), rate))
    records = arrange(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS)
    return arrive_first(records, [TWEETS_TOPIC]) if tweets_first else records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m generators.tweet_views",
                                     description="Produce seeded users and tweets for the tweet-views join.")
    add_generator_args(parser)
    g = parser.add_argument_group("tweet-views options")
    g.add_argument("--users", type=int, help="distinct users (default: count / 10)")
    g.add_argument("--user-updates", type=float, default=0.2,
                   help="profile updates (new user versions, after the user's tweets) per user (default 0.2)")
    g.add_argument("--tweet-edits", type=float, default=0.1, help="edits (new versions) per tweet (default 0.1)")
    g.add_argument("--tweets-first", action="store_true", help="every tweet arrives before every user")
    args = parser.parse_args(argv)
    check_generator_args(parser, args)
    if args.users is not None and not 1 <= args.users <= args.count:
        parser.error(f"--users must be between 1 and --count ({args.count}); lower --users or raise --count")
    if args.user_updates < 0 or args.tweet_edits < 0:
        parser.error("--user-updates and --tweet-edits must be >= 0 (e.g. 0.2)")
    records = stream(args.seed, args.count, users=args.users, user_updates=args.user_updates,
                     tweet_edits=args.tweet_edits, tweets_first=args.tweets_first,
                     disorder=disorder_from_args(args), rate=args.rate or 1000.0)
    produce("tweet-views", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
