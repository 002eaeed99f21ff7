"""Car pollution end to end: generator -> Kafka -> Spark job -> Kafka -> verifier, real parts only."""
import json

import pytest

import jobs.car_pollution.parts as cp
from generators.car_pollution import generate
from joinlab.generate import Disorder, Record, arrive_first, send
from joinlab.topics import create_topics, read_topics
from joinlab.verify import verify
from tests.conftest import assert_dead_lettered, run_job_to_end, stop_mid_stream_and_resume

pytestmark = pytest.mark.spark

SHUFFLED = Disorder(delayed=0.5, max_delay_s=20, duplicates=0.1, malformed=0.02)
AT = "2026-01-01T00:00:00.000Z"


def run_to_end(spark, bootstrap, checkpoint, **kwargs):
    return run_job_to_end(spark, cp, bootstrap, checkpoint, **kwargs)


def setup_topics(bootstrap):
    create_topics(bootstrap, cp.INPUT_TOPICS + cp.OUTPUT_TOPICS)


@pytest.mark.parametrize("seed,arrival_order", [(1, "shuffled"), (2, "shuffled"), (3, "cars-first")])
def test_final_views_equal_the_batch_reference(spark, bootstrap, tmp_path, seed, arrival_order):
    setup_topics(bootstrap)
    records = generate(seed, 1500, disorder=SHUFFLED if arrival_order == "shuffled" else Disorder(duplicates=0.05))
    if arrival_order == "cars-first":  # every car is emitted before any reading, then must be re-emitted
        records = arrive_first(records, [cp.ARRIVALS_TOPIC])
    send(bootstrap, records, progress=False)
    query = run_to_end(spark, bootstrap, tmp_path / "cp", max_offsets_per_trigger=500)
    assert len([p for p in query.recentProgress if p.numInputRows]) >= 3, "want several micro-batches"
    report = verify("car-pollution", bootstrap)
    assert report.expected > 200
    assert report.ok, "\n".join(report.lines())


def send_json(bootstrap, topic, key, body):
    send(bootstrap, [Record(topic, str(key).encode(), json.dumps(body).encode(), "event")], progress=False)


def arrive(bootstrap, car, zone, seq, fuel=50.0):
    send_json(bootstrap, cp.ARRIVALS_TOPIC, car, {"car_id": car, "plate": f"P-{car}", "to_zone_id": zone,
                                                  "fuel_level": fuel, "seq": seq, "event_time": AT})


def report_reading(bootstrap, zone, seq, level):
    send_json(bootstrap, cp.READINGS_TOPIC, zone, {"zone_id": zone, "pollution_level": level, "seq": seq,
                                                   "event_time": AT})


def outputs(bootstrap, after: set | None = None) -> list[dict]:
    """The output records (in offset order per partition), those not in `after` if given."""
    records = read_topics(bootstrap, [cp.OUTPUT_TOPIC])
    return [json.loads(r.value) for r in records if after is None or (r.partition, r.offset) not in after]


def positions(bootstrap) -> set:
    return {(r.partition, r.offset) for r in read_topics(bootstrap, [cp.OUTPUT_TOPIC])}


def test_zone_updates_reach_exactly_the_cars_in_the_zone_across_moves(spark, bootstrap, tmp_path):
    """Cars 1-20 in zone 1000 (cars 2-9 were lost by the original's byte-ordered key scan), a
    same-zone move that must keep its car, and a move whose DEL must reach the output topic."""
    setup_topics(bootstrap)
    for car in range(1, 21):
        arrive(bootstrap, car, 1000, 1)
    for car, zone in [(21, 100), (22, 10000), (23, 5)]:
        arrive(bootstrap, car, zone, 1)
    report_reading(bootstrap, 5, 1, 30.0)
    run_to_end(spark, bootstrap, tmp_path / "cp")
    assert sorted(v["car_id"] for v in outputs(bootstrap)) == list(range(1, 24))

    arrive(bootstrap, 23, 5, 2, fuel=45.0)   # "moves" into the zone it is in
    arrive(bootstrap, 22, 100, 2)            # leaves zone 10000
    run_to_end(spark, bootstrap, tmp_path / "cp")
    seen = positions(bootstrap)
    assert [(v["op"], v["zone_id"]) for v in outputs(bootstrap) if v["car_id"] == 22][1:] in (
        [("DEL", 10000), ("ADD", 100)], [("ADD", 100), ("DEL", 10000)])

    for zone, level in [(1000, 80.5), (5, 31.0), (10000, 99.0)]:
        report_reading(bootstrap, zone, 2 if zone == 5 else 1, level)
    run_to_end(spark, bootstrap, tmp_path / "cp")
    fresh = outputs(bootstrap, after=seen)
    by_zone = {zone: sorted(v["car_id"] for v in fresh if v["zone_id"] == zone) for zone in (1000, 5, 10000)}
    assert by_zone == {1000: list(range(1, 21)), 5: [23], 10000: []}
    assert {v["op"] for v in fresh} == {"ADD"}
    report = verify("car-pollution", bootstrap)
    assert report.ok, "\n".join(report.lines())


def test_restart_from_the_checkpoint_mid_stream_still_equals_the_reference(spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    send(bootstrap, generate(11, 3000, disorder=SHUFFLED), progress=False)
    stop_mid_stream_and_resume(spark, cp, bootstrap, str(tmp_path / "cp"), max_offsets_per_trigger=400)
    report = verify("car-pollution", bootstrap)
    assert report.ok, "\n".join(report.lines())


BAD = {
    "malformed JSON": b'{"car_id": 1, "plate": ',
    "missing field: to_zone_id": json.dumps({"car_id": 1, "plate": "x", "fuel_level": 1.0, "seq": 1,
                                             "event_time": AT}).encode(),
    "invalid field: fuel_level (expected double)": json.dumps({"car_id": 1, "plate": "x", "to_zone_id": 3,
                                                               "fuel_level": "full", "seq": 1, "event_time": AT}).encode(),
    "invalid field: seq (must be >= 1)": json.dumps({"car_id": 1, "plate": "x", "to_zone_id": 3,
                                                     "fuel_level": 1.0, "seq": 0, "event_time": AT}).encode(),
}


def test_bad_records_are_dead_lettered_with_their_reason_and_valid_records_are_unaffected(
        spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    good = generate(5, 600)
    bad = [Record(cp.ARRIVALS_TOPIC, f"bad-{i}".encode(), value, "bad") for i, value in enumerate(BAD.values())]
    send(bootstrap, good[:300] + bad + good[300:], progress=False)
    run_to_end(spark, bootstrap, tmp_path / "cp", max_offsets_per_trigger=200)
    assert_dead_lettered(bootstrap, "car-pollution", cp.DEAD_LETTERS_TOPIC, cp.ARRIVALS_TOPIC, BAD)
    report = verify("car-pollution", bootstrap)
    assert report.ok and report.expected > 50, "\n".join(report.lines())
