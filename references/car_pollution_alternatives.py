"""Why the car-pollution job has two stages and a tall zone state: the simpler designs, measured
on the same events (plain Python, one event at a time, in arrival order).

- naive: the stream-to-table join (Kafka Streams' KStream-KTable, Spark's stream-static join).
  Each car event looks up its zone's latest reading and emits one view; a reading only updates
  the table. It even gets the benefit of versions (stale events ignored), so what it gets wrong
  is only what the design cannot do: a car that arrived before its zone's first reading has no
  view (inner join), and a reading never reaches the cars already in the zone (stale views).
- wide: the right semantics, but the zone's state is one row (the reading and a list of all its
  cars) rewritten on every change, so bytes written grow with the number of cars per zone.
- tall (the job): one state entry per car in the zone, so a move writes two small entries.

State bytes are the JSON encoding of each key and value written (a delete writes its key), the
same measure for every design; the absolute numbers are not RocksDB's, the ratios are the point.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from joinlab.kit.events import valid_events
from joinlab.topics import Consumed
from jobs.car_pollution.job import ARRIVALS, READINGS
from references.car_pollution import car_view, expected
from references.car_pollution import version as view_version


def _size(*parts) -> int:
    return sum(len(json.dumps(p, separators=(",", ":"), default=str)) for p in parts)


@dataclass
class Result:
    approach: str
    events: int = 0
    views: dict = field(default_factory=dict)  # car -> last view emitted (by version)
    outputs: int = 0                           # records emitted
    state_writes: int = 0                      # puts + deletes
    state_bytes: int = 0
    missing: int = 0
    stale: int = 0

    def emit(self, v: dict) -> None:
        self.outputs += 1
        current = self.views.get(v["car_id"])
        if current is None or view_version(v) >= view_version(current):
            self.views[v["car_id"]] = v

    def write(self, *parts) -> None:
        self.state_writes += 1
        self.state_bytes += _size(*parts)

    def score(self, want: dict) -> "Result":
        self.missing = sum(1 for car in want if car not in self.views)
        self.stale = sum(1 for car, v in want.items() if car in self.views and self.views[car] != v)
        return self


def _events(records: list[Consumed]):
    """Valid events in arrival order, as (is_arrival, event)."""
    for schema, event in valid_events(records, [ARRIVALS, READINGS]):
        yield schema is ARRIVALS, event


def naive(records: list[Consumed]) -> Result:
    result, cars, table = Result("naive stream-to-table join"), {}, {}
    for is_arrival, e in _events(records):
        result.events += 1
        if not is_arrival:
            if e["zone_id"] not in table or e["seq"] > table[e["zone_id"]]["seq"]:
                table[e["zone_id"]] = e
                result.write(e["zone_id"], e)  # the table; nothing is emitted
            continue
        if e["car_id"] in cars and e["seq"] <= cars[e["car_id"]]:
            continue
        cars[e["car_id"]] = e["seq"]
        reading = table.get(e["to_zone_id"])
        if reading is not None:  # an inner join: no reading yet, no view
            result.emit(car_view(e, e["to_zone_id"], reading))
    return result


def correct(records: list[Consumed], wide: bool, keep_views: bool = True) -> Result:
    """The job's semantics; `wide` stores each zone as one row rewritten on every change.
    keep_views=False only counts the outputs (a reading's fan-out is most of the time)."""
    result = Result("wide-row join (zone -> all its cars)" if wide else "tall join (this job)")
    where: dict[int, dict] = {}                  # stage 1: car -> its latest arrival
    readings: dict[int, dict] = {}               # stage 2: zone -> reading
    members: dict[int, dict[int, dict]] = {}     # stage 2: zone -> car -> arrival

    car_bytes: dict[int, dict[int, int]] = {}   # wide: zone -> car -> the size of its entry
    total: dict[int, int] = {}                   # wide: zone -> the sum of those sizes

    def save_zone(zone: int, changed_car: int | None, deleted: bool = False) -> None:
        if wide:  # the whole row: {"reading": ..., "cars": [...]} - its size, without re-encoding it
            sizes = car_bytes.setdefault(zone, {})
            if changed_car is not None:
                total[zone] = total.get(zone, 0) - sizes.pop(changed_car, 0)
                if not deleted:
                    sizes[changed_car] = _size(members[zone][changed_car]) + 1  # and a comma
                    total[zone] += sizes[changed_car]
            result.state_writes += 1
            result.state_bytes += _size(zone, readings.get(zone)) + total.get(zone, 0) + 20
        elif changed_car is None:
            result.write(zone, readings[zone])
        else:
            result.write([zone, changed_car], *([] if deleted else [members[zone][changed_car]]))

    for is_arrival, e in _events(records):
        result.events += 1
        if not is_arrival:
            zone = e["zone_id"]
            if zone in readings and e["seq"] <= readings[zone]["seq"]:
                continue
            readings[zone] = e
            save_zone(zone, None)
            if not keep_views:
                result.outputs += len(members.get(zone, {}))
                continue
            for car in members.get(zone, {}).values():
                result.emit(car_view(car, zone, e))
            continue
        old = where.get(e["car_id"])
        if old is not None and e["seq"] <= old["seq"]:
            continue
        where[e["car_id"]] = e
        result.write(e["car_id"], [e["seq"], e["to_zone_id"]])  # stage 1's car state
        if old is not None and old["to_zone_id"] != e["to_zone_id"]:
            del members[old["to_zone_id"]][e["car_id"]]
            save_zone(old["to_zone_id"], e["car_id"], deleted=True)
            result.outputs += 1  # the DEL record
        members.setdefault(e["to_zone_id"], {})[e["car_id"]] = e
        save_zone(e["to_zone_id"], e["car_id"])
        result.emit(car_view(e, e["to_zone_id"], readings.get(e["to_zone_id"])))
    return result


def compare(records: list[Consumed]) -> list[Result]:
    """The three designs on the same records, each scored against the batch reference."""
    want = expected(records)
    return [r.score(want) for r in (correct(records, wide=False), correct(records, wide=True), naive(records))]


def format_table(results: list[Result], cars: int) -> str:
    lines = [f"{'approach':<38} {'right':>6} {'missing':>8} {'stale':>6} {'outputs':>8} "
             f"{'state writes/event':>19} {'state bytes/event':>18}"]
    for r in results:
        right = cars - r.missing - r.stale
        lines.append(f"{r.approach:<38} {right:>6} {r.missing:>8} {r.stale:>6} {r.outputs:>8} "
                     f"{r.state_writes / r.events:>19.2f} {r.state_bytes / r.events:>18.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`joinlab compare car-pollution`: the three designs on one seeded event set, then the
    wide row's write amplification as zones get more cars."""
    import argparse

    from generators.car_pollution import generate
    from joinlab.generate import Disorder
    parser = argparse.ArgumentParser(prog="joinlab compare car-pollution", description=(
        "Compare the naive stream-to-table join, the wide-row join and the tall join (this job) "
        "on the same generated events, against the batch reference."))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--count", type=int, default=20000, help="events (default 20000)")
    parser.add_argument("--cars", type=int, default=1000, help="fleet size (default 1000)")
    parser.add_argument("--zones", type=int, default=50, help="zones (default 50)")
    parser.add_argument("--delayed", type=float, default=0.3, help="fraction of events delayed (default 0.3)")
    args = parser.parse_args(argv)
    if args.count < 10 or not 1 <= args.cars <= args.count // 2 or args.zones < 1:
        parser.error("need --count >= 10, 1 <= --cars <= count / 2 and --zones >= 1")
    disorder = Disorder(delayed=args.delayed, max_delay_s=5.0 if args.delayed else 0.0)
    records = generate(args.seed, args.count, cars=args.cars, zones=args.zones, disorder=disorder)
    print(f"{args.count} events, {args.cars} cars in {args.zones} zones, seed {args.seed}, "
          f"{args.delayed:.0%} delayed up to 5 s; scored against the batch reference ({args.cars} views)\n")
    print(format_table(compare(records), args.cars))
    print("\nwide-row write amplification as zones fill up (same events count and fleet):")
    print(f"{'cars per zone':>14} {'tall bytes/event':>17} {'wide bytes/event':>17} {'wide / tall':>12}")
    for zones in sorted({max(1, args.cars // n) for n in (5, 50, 500)}, reverse=True):
        sample = generate(args.seed, args.count, cars=args.cars, zones=zones)
        tall, wide = correct(sample, wide=False, keep_views=False), correct(sample, wide=True, keep_views=False)
        print(f"{args.cars / zones:>14.0f} {tall.state_bytes / tall.events:>17.0f} "
              f"{wide.state_bytes / wide.events:>17.0f} {wide.state_bytes / tall.state_bytes:>11.1f}x")
    return 0
