"""Car arrivals and zone readings for the car-pollution join (contract: jobs/car_pollution/job.py).

Why this shape: the join must keep every car's view on its current zone's latest pollution
while cars move and zones report, so the event-time story has each case it must survive: cars
arriving in a zone that has not reported yet (a NULL pollution, then a re-emit), readings that
must reach every car in the zone, moves that must leave the old zone, and "moves" into the zone
the car is already in. Car ids and zone ids have mixed digit counts (1..N), which is what broke
the original's byte-ordered range scan. Arrivals are keyed by car id, readings by zone id;
`seq` counts 1..n per car and per zone in event-time order.

    python -m generators.car_pollution --count 1000 --cars 100 --zones 12 --delayed 0.3 --max-delay 5
"""
from __future__ import annotations

import argparse
import math
import random
from array import array
from collections.abc import Iterator
from datetime import timedelta

from faker import Faker

from jobs.car_pollution.job import ARRIVALS, ARRIVALS_TOPIC, INPUT_TOPICS, READINGS, READINGS_TOPIC
from joinlab.generate import (START, Disorder, Event, Record, Records, add_generator_args, arrange, arranged,
                              check_generator_args, disorder_from_args, iso, produce)

SCHEMAS = {ARRIVALS_TOPIC: ARRIVALS, READINGS_TOPIC: READINGS}


def _sizes(count: int, cars: int | None, zones: int | None, readings: float) -> tuple[int, int, int]:
    """(cars, zones, reading events), checked."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not 0.0 <= readings < 1.0:
        raise ValueError(f"readings must be a fraction in [0, 1), got {readings}")
    n_readings = round(count * readings)
    n_cars = max(1, (count - n_readings) // 5) if cars is None else cars
    if not 1 <= n_cars <= count - n_readings:
        raise ValueError(f"cars must be between 1 and the number of car events ({count - n_readings}), got {n_cars}")
    n_zones = max(2, n_cars // 8) if zones is None else zones
    if n_zones < 1:
        raise ValueError(f"zones must be >= 1, got {n_zones}")
    return n_cars, n_zones, n_readings


def _events(seed: int, count: int, sizes: tuple[int, int, int], same_zone: float, rate: float) -> Iterator[Event]:
    """The events in event-time order, made one by one; what is kept is per car and per zone."""
    n_cars, n_zones, n_readings = sizes
    rng, fake = random.Random(seed), Faker("en_US")
    fake.seed_instance(seed)
    plates = [fake.unique.license_plate() for _ in range(n_cars)]
    fake.unique.clear()  # every plate is drawn: Faker need not remember them
    slots = bytearray(count - n_readings) + b"\x01" * n_readings  # 0: a car event, 1: a zone reading
    rng.shuffle(slots)
    first_arrivals = array("q", range(n_cars))
    rng.shuffle(first_arrivals)  # every car arrives once before any car moves again
    where = array("q", bytes(8 * n_cars))  # each car's zone (0: not arrived yet)
    fuel = array("d", [math.nan]) * n_cars  # each car's fuel level (nan: not arrived yet)
    car_seq, zone_seq = array("q", bytes(8 * n_cars)), array("q", bytes(8 * (n_zones + 1)))
    pollution: dict[int, float] = {}
    for i, slot in enumerate(slots):
        at = START + timedelta(seconds=i / rate)
        if slot:
            zone = rng.randint(1, n_zones)
            pollution[zone] = round(min(500.0, max(0.0, pollution.get(zone, rng.uniform(20, 200)) + rng.gauss(0, 25))), 1)
            zone_seq[zone] += 1
            body = {"zone_id": zone, "pollution_level": pollution[zone], "seq": zone_seq[zone], "event_time": iso(at)}
            yield Event(READINGS_TOPIC, zone, body, at)
            continue
        car = first_arrivals.pop() if first_arrivals else rng.randrange(n_cars)
        if where[car] and rng.random() < same_zone:
            zone = where[car]  # a "move" into the zone the car is already in: it must stay there
        else:
            zone = rng.randint(1, n_zones)
        where[car] = zone
        first_fuel = rng.uniform(40, 100)  # drawn for every move, as the first arrival's level
        fuel[car] = round(max(0.0, (first_fuel if math.isnan(fuel[car]) else fuel[car]) - rng.uniform(0, 3)), 1)
        car_seq[car] += 1
        body = {"car_id": car + 1, "plate": plates[car], "to_zone_id": zone, "fuel_level": fuel[car],
                "seq": car_seq[car], "event_time": iso(at)}
        yield Event(ARRIVALS_TOPIC, car + 1, body, at)


def _checked(rate: float, same_zone: float) -> None:
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if not 0.0 <= same_zone <= 1.0:
        raise ValueError(f"same_zone must be a fraction between 0 and 1, got {same_zone}")


def stream(seed: int, count: int, *, cars: int | None = None, zones: int | None = None,
           readings: float = 0.3, same_zone: float = 0.05, disorder: Disorder = Disorder(),
           rate: float = 1000.0) -> Records:
    """`generate`'s records, the same ones in the same order, made as they are iterated (what the CLI
    sends: its memory does not grow with the run; joinlab.generate.arranged)."""
    _checked(rate, same_zone)
    sizes = _sizes(count, cars, zones, readings)
    return arranged(lambda: _events(seed, count, sizes, same_zone, rate), disorder,
                    random.Random(f"{seed}/arrange"), SCHEMAS, count=count)


def generate(seed: int, count: int, *, cars: int | None = None, zones: int | None = None,
             readings: float = 0.3, same_zone: float = 0.05, disorder: Disorder = Disorder(),
             rate: float = 1000.0) -> list[Record]:
    """The records to produce, in arrival order; `count` is the number of valid events.

    cars: fleet size (default: a fifth of the car events); zones (default cars / 8, at least 2);
    readings: the share of events that are zone readings, the rest are car arrivals (moves);
    same_zone: the share of moves into the zone the car is already in; rate: events per second
    of event time.
    """
    _checked(rate, same_zone)
    events = list(_events(seed, count, _sizes(count, cars, zones, readings), same_zone, rate))
    return arrange(events, disorder, random.Random(f"{seed}/arrange"), SCHEMAS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m generators.car_pollution",
                                     description="Produce seeded car arrivals and zone readings for the car-pollution join.")
    add_generator_args(parser)
    g = parser.add_argument_group("car-pollution options")
    g.add_argument("--cars", type=int, help="fleet size (default: a fifth of the car events)")
    g.add_argument("--zones", type=int, help="number of zones (default: cars / 8, at least 2)")
    g.add_argument("--readings", type=float, default=0.3,
                   help="share of events that are zone readings; the rest are car moves (default 0.3)")
    g.add_argument("--same-zone", type=float, default=0.05,
                   help="share of moves into the zone the car is already in (default 0.05)")
    args = parser.parse_args(argv)
    check_generator_args(parser, args)
    if not 0.0 <= args.readings < 1.0 or not 0.0 <= args.same_zone <= 1.0:
        parser.error("--readings must be in [0, 1) and --same-zone in [0, 1], e.g. --readings 0.3 --same-zone 0.05")
    try:
        records = stream(args.seed, args.count, cars=args.cars, zones=args.zones, readings=args.readings,
                         same_zone=args.same_zone, disorder=disorder_from_args(args), rate=args.rate or 1000.0)
    except ValueError as exc:
        parser.error(f"{exc}; adjust --cars/--zones or raise --count")
    produce("car-pollution", args, INPUT_TOPICS, records)


if __name__ == "__main__":
    main()
