"""Pure-logic tests of the two car-pollution stages with pyspark's in-memory TwsTester: no Spark
session, no broker. `Pipeline` (jobs.car_pollution.job.InMemory) routes stage 1's output to stage 2 by zone, as
the query does."""
import json
import random
from datetime import datetime, timezone

import pytest

from generators.car_pollution import generate
from joinlab.generate import Disorder
from jobs.car_pollution.given import ADD
from jobs.car_pollution.job import ARRIVALS, READINGS
from jobs.car_pollution.given import DEL
from jobs.car_pollution.in_memory import event_row
from jobs.car_pollution.in_memory import InMemory as Pipeline
from references import car_pollution as reference

T = datetime(2026, 1, 1, tzinfo=timezone.utc)


def arrival(car, zone, seq, fuel=50.0, at=T, plate=None):
    """A car's arrival as stage 1 gets it."""
    return event_row(ARRIVALS, {"car_id": car, "plate": plate or f"P-{car}", "to_zone_id": zone,
                                "fuel_level": fuel, "seq": seq, "event_time": at})


def reading(zone, seq, level, at=T):
    """A zone's reading as stage 1 gets it."""
    return event_row(READINGS, {"zone_id": zone, "pollution_level": level, "seq": seq, "event_time": at})


def cars_of(views, op=ADD):
    return sorted(v.car_id for v in views if v.op == op)


def test_a_car_in_a_zone_without_a_reading_is_emitted_with_null_pollution_then_re_emitted():
    p = Pipeline()
    [view] = p.batch([arrival(1, 7, 1)])
    assert (view.op, view.zone_id, view.pollution_level) == (ADD, 7, None)
    [view] = p.batch([reading(7, 1, 42.0)])
    assert (view.car_id, view.pollution_level) == (1, 42.0)


def test_a_zone_update_re_emits_exactly_the_cars_currently_in_it_including_cars_2_to_9_of_zone_1000():
    """The original's range scan compared JSON-encoded (zone, car) keys as bytes: cars 2-9 of zone
    1000 sorted after car 10..20 and outside the scanned range, so they were never found."""
    p = Pipeline()
    p.batch([arrival(car, 1000, 1) for car in range(1, 21)]
            + [arrival(car, zone, 1) for car, zone in [(21, 100), (22, 10000), (23, 1), (24, 10001)]])
    views = p.batch([reading(1000, 1, 80.5)])
    assert cars_of(views) == list(range(1, 21))
    assert {(v.zone_id, v.pollution_level) for v in views} == {(1000, 80.5)}


def test_a_move_into_the_same_zone_keeps_the_car():
    """The original emitted ADD then DEL for the same zone, and the car vanished."""
    p = Pipeline()
    p.batch([arrival(1, 5, 1)])
    [view] = p.batch([arrival(1, 5, 2, fuel=40.0)])
    assert (view.op, view.car_seq, view.fuel_level) == (ADD, 2, 40.0)
    assert cars_of(p.batch([reading(5, 1, 10.0)])) == [1]
    assert p.zones.peekMapState("cars", 5)[(1,)][:3] == (2, "P-1", 40.0)


def test_a_move_emits_a_del_for_the_old_zone_and_the_old_zone_then_skips_the_car():
    p = Pipeline()
    p.batch([arrival(1, 5, 1), arrival(2, 5, 1), reading(5, 1, 10.0), reading(6, 1, 60.0)])
    moved = p.batch([arrival(1, 6, 2)])
    assert [(v.op, v.zone_id, v.car_seq) for v in sorted(moved, key=lambda v: v.op)] == [(ADD, 6, 2), (DEL, 5, 1)]
    assert [v.pollution_level for v in moved if v.op == ADD] == [60.0]
    assert cars_of(p.batch([reading(5, 2, 11.0)])) == [2]
    assert cars_of(p.batch([reading(6, 2, 61.0)])) == [1]


def test_stale_and_duplicate_events_are_ignored():
    p = Pipeline()
    p.batch([arrival(1, 6, 3), reading(6, 5, 99.0)])
    assert p.batch([arrival(1, 5, 2), arrival(1, 6, 3), reading(6, 4, 1.0), reading(6, 5, 99.0)]) == []
    assert p.moves.peekValueState("car", ("car", 1)) == (3, 6)


def test_a_car_moving_twice_within_one_batch_lands_in_the_last_zone_only():
    p = Pipeline()
    p.batch([arrival(1, 5, 1)])
    views = p.batch([arrival(1, 7, 3), arrival(1, 6, 2)])
    assert sorted((v.op, v.zone_id) for v in views) == [(ADD, 7), (DEL, 5)]
    assert p.zones.peekMapState("cars", 6) == {}


@pytest.mark.parametrize("seed", range(8))
def test_random_batches_of_disordered_events_converge_to_the_reference(seed):
    records = generate(seed, 600, disorder=Disorder(delayed=0.5, max_delay_s=30, duplicates=0.1, malformed=0.02))
    p = Pipeline()
    rows, rng, views = p.rows(records), random.Random(seed), []
    while rows:
        size = rng.randint(1, 120)
        views += p.batch(rows[:size])
        rows = rows[size:]
    assert p.views(views) == reference.expected(records)


# --- The generator ------------------------------------------------------------------------------

def _events(records):
    return [(r, json.loads(r.value)) for r in records if r.kind == "event"]


def test_the_generator_is_seeded_and_every_record_is_keyed_by_its_entity():
    assert generate(3, 400) == generate(3, 400) != generate(4, 400)
    for record, body in _events(generate(3, 400)):
        entity = body["car_id"] if record.topic == ARRIVALS.topic else body["zone_id"]
        assert record.key == str(entity).encode()


def test_seqs_count_1_to_n_per_car_and_zone_in_event_time_order():
    seen: dict = {}
    for record, body in _events(generate(5, 2000)):  # no disorder: arrival order is event-time order
        entity = (record.topic, body.get("car_id", body.get("zone_id")))
        assert body["seq"] == seen.get(entity, 0) + 1
        seen[entity] = body["seq"]


def test_fleet_zones_readings_and_same_zone_moves_follow_the_knobs():
    events = _events(generate(6, 3000, cars=100, zones=40, readings=0.25, same_zone=0.2))
    arrivals = [b for r, b in events if r.topic == ARRIVALS.topic]
    assert {b["car_id"] for b in arrivals} == set(range(1, 101))
    assert {b["to_zone_id"] for b in arrivals} == set(range(1, 41)), "ids of 1 and 2 digits, every zone used"
    assert len(events) - len(arrivals) == 750
    last, same = {}, 0
    for b in arrivals:
        same += last.get(b["car_id"]) == b["to_zone_id"]
        last[b["car_id"]] = b["to_zone_id"]
    assert 0.15 < same / (len(arrivals) - 100) < 0.3


@pytest.mark.parametrize("argv, message", [
    (["--count", "10", "--cars", "50"], "cars must be between 1 and"),
    (["--readings", "1.5"], "--readings must be in [0, 1)"),
    (["--delayed", "0.2"], "--delayed needs --max-delay"),
])
def test_generator_cli_errors_say_what_to_do(argv, message, capsys):
    from generators.car_pollution import main
    with pytest.raises(SystemExit):
        main(argv + ["--bootstrap", "127.0.0.1:1"])
    assert message in capsys.readouterr().err


# --- The designs it replaces (references/car_pollution_alternatives.py) -------------------------

def test_the_naive_join_misses_zone_updates_and_the_wide_row_writes_more_for_the_same_answer():
    from references.car_pollution_alternatives import compare
    tall, wide, naive = compare(generate(9, 4000, cars=200, zones=10, disorder=Disorder(delayed=0.3, max_delay_s=5)))
    assert tall.missing == tall.stale == wide.missing == wide.stale == 0, "both correct designs match the reference"
    assert naive.stale > 50, "readings never reach the cars already in the zone"
    assert tall.outputs == wide.outputs and tall.state_writes == wide.state_writes
    assert wide.state_bytes > 10 * tall.state_bytes, "20 cars per zone: every move rewrites two zone rows"


def test_the_naive_join_has_no_view_for_a_car_whose_zone_never_reported():
    from references.car_pollution_alternatives import naive
    from jobs.car_pollution.job import ARRIVALS_TOPIC
    from joinlab.generate import Record
    body = {"car_id": 1, "plate": "P", "to_zone_id": 3, "fuel_level": 1.0, "seq": 1, "event_time": "2026-01-01T00:00:00Z"}
    assert naive([Record(ARRIVALS_TOPIC, b"1", json.dumps(body).encode(), "event")]).views == {}


def test_joinlab_compare_prints_the_table_and_the_amplification_sweep(capsys):
    from joinlab.cli import main
    assert main(["compare", "car-pollution", "--count", "2000", "--cars", "100", "--zones", "5"]) == 0
    out = capsys.readouterr().out
    assert "naive stream-to-table join" in out and "wide / tall" in out
    with pytest.raises(SystemExit):
        main(["compare", "car-pollution", "--count", "5", "--cars", "100"])
    assert "need --count >= 10" in capsys.readouterr().err


# --- State and its bounds ---------------------------------------------------------------------------

def test_state_is_bounded_by_the_fleet_one_entry_per_car_and_zone_however_many_events():
    """Stage 1 keeps one entry per car, stage 2 one reading per zone and each car in one zone
    only: more events over the same fleet do not grow the state."""
    def entries(p, cars, zones):
        in_zones = sum(len(p.zones.peekMapState("cars", z)) for z in zones)
        return sum(p.moves.peekValueState("car", ("car", c)) is not None for c in cars), in_zones

    p, rng = Pipeline(), random.Random(1)
    cars, zones, seqs = range(1, 41), range(1, 6), {}
    sizes = []
    for _ in range(2):
        for _ in range(20):
            batch = []
            for car in rng.sample(cars, 10):
                seqs[car] = seqs.get(car, 0) + 1
                batch.append(arrival(car, rng.choice(zones), seqs[car]))
            p.batch(batch + [reading(z, seqs.setdefault(("z", z), 0) + 1, 1.0) for z in zones])
            for z in zones:
                seqs[("z", z)] += 1
        sizes.append(entries(p, cars, zones))
    assert sizes[0] == sizes[1] == (40, 40)  # each car once in stage 1, and in exactly one zone


# --- State round trips per key and batch --------------------------------------------------------------

def _calls(n: int) -> dict:
    """Each stage's state calls (Spark's per-call one included) while car 1 reports `n` arrivals
    and zone 7 `n` readings in one batch, then the car moves away in the next: stage 2 writes one
    entry per car that arrived or left (its state is tall: one entry per car, by design), never
    one per event."""
    from tests.state_calls import count
    p = Pipeline()
    calls = {"moves": count(p.moves), "zones": count(p.zones)}
    p.batch([arrival(1, 7, seq) for seq in range(1, n + 1)] + [reading(7, seq, seq) for seq in range(1, n + 1)])
    p.batch([arrival(1, 8, n + 1)])
    return calls


def test_each_stage_makes_the_same_state_calls_per_key_and_batch_however_many_events_the_key_has():
    one, many = _calls(1), _calls(30)
    assert many == one
    # stage 1, per car and batch: Spark sets the key; the processor reads and writes
    assert one["moves"] == {"(framework) setImplicitKey": 3, "car.get": 2, "car.update": 2}
