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
import random
from datetime import timedelta

from faker import Faker

from jobs.tweet_views.job import INPUT_TOPICS, TWEETS, TWEETS_TOPIC, USERS, USERS_TOPIC
from joinlab.generate import (START, Disorder, Event, Record, add_generator_args, arrange, arrive_first,
                              check_generator_args, disorder_from_args, iso, produce)

SCHEMAS = {USERS_TOPIC: USERS, TWEETS_TOPIC: TWEETS}
FIRST_USER_ID, FIRST_TWEET_ID = 1_001, 7_000_000_001  # disjoint, so a join on the wrong id finds nothing


def _plan(rng: random.Random, users: int, tweets: int, edits: int,
          updates: int) -> tuple[list[tuple[str, int]], list[int]]:
    """((kind, entity) in event-time order, each tweet's author): a user before their tweets,
    edits after the tweet, profile updates after all of the user's tweet versions."""
    spread = max(1.0, tweets / 20)  # how far (in tweet slots) an edit or update may trail
    authors = [rng.randrange(users) for _ in range(tweets)]
    created = [rng.uniform(0, max(tweets, 1)) for _ in range(users)]  # for users who never tweet
    last = list(created)
    for t, u in enumerate(authors):
        created[u] = min(created[u], t - 0.5)
        last[u] = max(last[u], t)
    steps = [(float(t), "tweet", t) for t in range(tweets)]
    steps += [(created[u], "user", u) for u in range(users)]
    for _ in range(edits):
        t = rng.randrange(tweets)
        when = t + spread * (1.0 - rng.random())
        steps.append((when, "edit", t))
        last[authors[t]] = max(last[authors[t]], when)
    steps += [(last[u] + spread * (1.0 - rng.random()), "update", u)
              for u in (rng.randrange(users) for _ in range(updates))]
    steps.sort(key=lambda s: s[0])  # stable: a tie keeps the order above
    return [(kind, entity) for _, kind, entity in steps], authors


def _sentence(rng: random.Random, vocabulary: list[str]) -> str:
    return " ".join(rng.choices(vocabulary, k=rng.randint(4, 16))).capitalize() + "."


def _events(seed: int, count: int, users: int | None, user_updates: float, tweet_edits: float,
            rate: float) -> list[Event]:
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not (0 <= user_updates and 0 <= tweet_edits):
        raise ValueError("user_updates and tweet_edits must be >= 0")
    n_users = max(1, count // 10) if users is None else users
    if not 1 <= n_users <= count:
        raise ValueError(f"users must be between 1 and count ({count}), got {n_users}")
    n_tweets = max(0, round((count - n_users * (1 + user_updates)) / (1 + tweet_edits)))
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    vocabulary = fake.get_words_list()  # Faker's words; sentences built with rng (fake.sentence is ~10x slower)
    plan, authors = _plan(rng, n_users, n_tweets, round(tweet_edits * n_tweets), round(user_updates * n_users))

    events, versions = [], {}
    for i, (kind, entity) in enumerate(plan):
        at = START + timedelta(seconds=i / rate)
        if kind in ("user", "update"):
            user_id = FIRST_USER_ID + entity
            version = versions[("u", entity)] = versions.get(("u", entity), 0) + 1
            body = {"user_id": user_id, "name": fake.name(), "handle": fake.user_name(),
                    "version": version, "event_time": iso(at)}
            events.append(Event(USERS_TOPIC, user_id, body, at))
        else:
            tweet_id = FIRST_TWEET_ID + entity
            version = versions[("t", entity)] = versions.get(("t", entity), 0) + 1
            body = {"tweet_id": tweet_id, "user_id": FIRST_USER_ID + authors[entity],
                    "text": _sentence(rng, vocabulary), "version": version, "event_time": iso(at)}
            events.append(Event(TWEETS_TOPIC, tweet_id, body, at))
    return events


def generate(seed: int, count: int, *, users: int | None = None, user_updates: float = 0.2,
             tweet_edits: float = 0.1, tweets_first: bool = False, disorder: Disorder = Disorder(),
             rate: float = 1000.0) -> list[Record]:
    """The records to produce, in arrival order; `count` is the approximate number of valid events.

    users: distinct users (default count // 10); user_updates / tweet_edits: updates per user and
    edits per tweet, as fractions; rate: events per second of event time.
    """
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    events = _events(seed, count, users, user_updates, tweet_edits, rate)
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
    records = generate(args.seed, args.count, users=args.users, user_updates=args.user_updates,
                       tweet_edits=args.tweet_edits, tweets_first=args.tweets_first,
                       disorder=disorder_from_args(args), rate=args.rate or 1000.0)
    produce("tweet-views", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
