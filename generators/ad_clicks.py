"""Ad impressions and their clicks for the ad-clicks join (contract: jobs/ad_clicks/job.py).

Why this shape: Spark's stream-stream join must match a click to its impression whichever arrives
first, and emit an impression unclicked only once no click can come; so some impressions are
clicked soon, some late in the attribution window, some never, and a few are clicked after it
(`slow_clicks`: the click comes, but too late to count). Event time runs at `rate` events per
second, so a run spans minutes of event time and the watermark decides most unclicked impressions
before its end.

    python -m generators.ad_clicks --count 1000 --delayed 0.3 --max-delay 5 --malformed 0.01
"""
from __future__ import annotations

import argparse
import heapq
import random
from collections.abc import Iterator
from datetime import datetime, timedelta

from faker import Faker

from jobs.ad_clicks.given import ATTRIBUTION
from jobs.ad_clicks.job import CLICKS, CLICKS_TOPIC, IMPRESSIONS, IMPRESSIONS_TOPIC, INPUT_TOPICS
from joinlab.generate import (START, Disorder, Event, Record, Records, add_generator_args, arrange, arranged,
                              check_generator_args, disorder_from_args, iso, produce)

SCHEMAS = {IMPRESSIONS_TOPIC: IMPRESSIONS, CLICKS_TOPIC: CLICKS}
FIRST_IMPRESSION_ID, FIRST_CLICK_ID, FIRST_AD_ID = 1_000_001, 9_000_000_001, 501  # disjoint: a join on the wrong id finds nothing
SLOTS = ("feed", "sidebar", "search", "video")


def _events(seed: int, count: int, click_rate: float, slow_clicks: float, ads: int, rate: float) -> Iterator[Event]:
    """Impressions at `rate` per second of event time (clicks counted in the rate), each clicked with
    probability `click_rate`: within ATTRIBUTION after it, or (a `slow_clicks` fraction of the clicks)
    up to twice that. In event-time order, an impression before a click at the same moment: each click
    waits in a heap until no impression before it is still to come (up to twice ATTRIBUTION)."""
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    placements = [f"{fake.domain_word()}/{rng.choice(SLOTS)}" for _ in range(max(1, ads // 2))]
    window = ATTRIBUTION.total_seconds()
    impressions = max(1, round(count / (1 + click_rate)))
    waiting: list[tuple[datetime, int, Event]] = []  # clicks by (time, made): a stable sort's order
    clicks = 0
    for n in range(impressions):
        at = START + timedelta(seconds=n * (1 + click_rate) / rate)
        while waiting and waiting[0][0] <= at:  # made before this impression: first at the same moment
            yield heapq.heappop(waiting)[2]
        impression_id = FIRST_IMPRESSION_ID + n
        body = {"impression_id": impression_id, "ad_id": FIRST_AD_ID + rng.randrange(ads),
                "placement": rng.choice(placements), "event_time": iso(at)}
        yield Event(IMPRESSIONS_TOPIC, impression_id, body, at)  # no click still to come is before it
        if rng.random() < click_rate:
            after = window * (1 + rng.uniform(0.05, 1)) if rng.random() < slow_clicks else window * rng.uniform(0, 0.8)
            clicked = at + timedelta(milliseconds=round(after * 1000))
            body = {"click_id": FIRST_CLICK_ID + clicks, "impression_id": impression_id, "event_time": iso(clicked)}
            click = Event(CLICKS_TOPIC, impression_id, body, clicked)  # keyed by impression, as the join
            heapq.heappush(waiting, (clicked, clicks, click))
            clicks += 1
    while waiting:
        yield heapq.heappop(waiting)[2]


def _checked(count: int, click_rate: float, slow_clicks: float, ads: int, rate: float) -> None:
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not (0 <= click_rate <= 1 and 0 <= slow_clicks <= 1):
        raise ValueError("click_rate and slow_clicks must be fractions between 0 and 1")
    if ads < 1 or rate <= 0:
        raise ValueError(f"ads must be >= 1 and rate > 0, got {ads} and {rate}")


def stream(seed: int, count: int, *, click_rate: float = 0.4, slow_clicks: float = 0.05, ads: int = 40,
           disorder: Disorder = Disorder(), rate: float = 5.0) -> Records:
    """`generate`'s records, the same ones in the same order, made as they are iterated (what the CLI
    sends: its memory does not grow with the run; joinlab.generate.arranged). How many clicks there
    are is drawn with the events: a first pass counts them."""
    _checked(count, click_rate, slow_clicks, ads, rate)
    return arranged(lambda: _events(seed, count, click_rate, slow_clicks, ads, rate), disorder,
                    random.Random(f"{seed}/arrange"), SCHEMAS)


def generate(seed: int, count: int, *, click_rate: float = 0.4, slow_clicks: float = 0.05, ads: int = 40,
             disorder: Disorder = Disorder(), rate: float = 5.0) -> list[Record]:
    """The records to produce, in arrival order; `count` is the approximate number of valid events.

    click_rate: the fraction of impressions clicked; slow_clicks: the fraction of clicks that come
    after the attribution window; ads: distinct ads; rate: events per second of event time.
    """
    _checked(count, click_rate, slow_clicks, ads, rate)
    events = list(_events(seed, count, click_rate, slow_clicks, ads, rate))  # one pass: it counts them too
    return arrange(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m generators.ad_clicks",
                                     description="Produce seeded ad impressions and clicks for the ad-clicks join.")
    add_generator_args(parser)
    g = parser.add_argument_group("ad-clicks options")
    g.add_argument("--click-rate", type=float, default=0.4, help="fraction of impressions clicked (default 0.4)")
    g.add_argument("--slow-clicks", type=float, default=0.05,
                   help="fraction of clicks that come after the one-minute attribution window (default 0.05)")
    g.add_argument("--ads", type=int, default=40, help="distinct ads (default 40)")
    args = parser.parse_args(argv)
    check_generator_args(parser, args)
    if not (0 <= args.click_rate <= 1 and 0 <= args.slow_clicks <= 1):
        parser.error("--click-rate and --slow-clicks are fractions between 0 and 1, e.g. 0.4")
    if args.ads < 1:
        parser.error("--ads must be >= 1")
    records = stream(args.seed, args.count, click_rate=args.click_rate, slow_clicks=args.slow_clicks,
                     ads=args.ads, disorder=disorder_from_args(args), rate=args.rate or 5.0)
    produce("ad-clicks", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
