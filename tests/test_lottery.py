"""Lottery end to end: generator -> Kafka -> Spark job -> Kafka -> verifier, real parts only.

Disorder stays within the watermark delay here (4 s + 1 s for a duplicate, against 10 s), so no
event is late and the outcomes are a function of the events alone; the late click is a crafted
scenario, sent after the job has moved past it."""
import json

import pytest

import jobs.lottery.parts as lottery
from generators.lottery import generate
from jobs.lottery.rules import ALREADY_STARTED, INACTIVE, LATE, NO_COUPON, NON_POSITIVE
from joinlab import runner
from joinlab.generate import Disorder, Record, send
from joinlab.topics import create_topics, read_topics
from joinlab.verify import verify
from references import lottery as reference
from tests.conftest import run_job_to_end, wait_for

pytestmark = pytest.mark.spark

OUTCOME_TOPICS = [lottery.WINNERS_TOPIC, lottery.REJECTIONS_TOPIC]
WITHIN_THE_DELAY = Disorder(delayed=0.5, max_delay_s=4.0, duplicates=0.1, malformed=0.02)


def setup_topics(bootstrap, partitions=None):
    create_topics(bootstrap, lottery.INPUT_TOPICS + lottery.OUTPUT_TOPICS, partitions=partitions)


def run_to_end(spark, bootstrap, checkpoint, **kwargs):
    return run_job_to_end(spark, lottery, bootstrap, checkpoint, **kwargs)


def outcomes(bootstrap) -> dict:
    """Winners and rejections on the output topics, as the reference reads them."""
    return reference.actual(read_topics(bootstrap, OUTCOME_TOPICS))


def in_chunks(records, n):
    """`records` cut into `n` runs of arrival order: what a live job reading them would see."""
    size = -(-len(records) // n)
    return [records[i:i + size] for i in range(0, len(records), size)]


@pytest.mark.parametrize("seed,topic_partitions,shuffle_partitions,chunks", [(1, 1, 1, 2), (2, 5, 8, 1)])
def test_outcomes_equal_the_batch_reference_for_any_partitioning(spark, bootstrap, tmp_path, seed,
                                                                 topic_partitions, shuffle_partitions, chunks):
    """The original was only right with one parallel instance: here 1 or 5 partitions per topic and
    1 or 8 state partitions give the reference's outcomes. With 1 partition the events arrive in
    two halves, each read by its own run from one checkpoint, as a live job reads what has
    arrived (a cap like maxOffsetsPerTrigger would read the sparse lottery topic behind the busy
    user topic: see jobs/lottery/README.md). Each run ends with a no-data batch that moves the watermark."""
    setup_topics(bootstrap, partitions=topic_partitions)
    records = generate(seed, 800, lotteries=3, users=30, disorder=WITHIN_THE_DELAY)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))  # taken by a fresh checkpoint only
    try:
        batches = 0
        for chunk in in_chunks(records, chunks):
            send(bootstrap, chunk, progress=False)
            batches += len(run_to_end(spark, bootstrap, tmp_path / "cp").recentProgress)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert batches >= chunks + 1, "want several micro-batches"
    report = verify("lottery", bootstrap)
    assert report.ok, "\n".join(report.lines())
    got = outcomes(bootstrap)
    assert sum(key.startswith("winner") for key in got) >= 6
    assert {v["rule"] for key, v in got.items() if key.startswith("rejection")} == {
        ALREADY_STARTED, NON_POSITIVE, INACTIVE, NO_COUPON}
    letters = read_topics(bootstrap, [lottery.DEAD_LETTERS_TOPIC])
    assert len(letters) == sum(r.kind not in ("event", "duplicate") for r in records)


AT = "2026-01-01T00:00:{:06.3f}Z"


def event(event_id, kind, seconds, **fields) -> Record:
    topic = lottery.LOTTERY_TOPIC if kind == "LotteryStarted" else lottery.USER_TOPIC
    key = fields["lottery_id"] if topic == lottery.LOTTERY_TOPIC else fields["user_id"]
    body = {"event_id": event_id, "type": kind, **fields, "event_time": AT.format(seconds)}
    return Record(topic, str(key).encode(), json.dumps(body).encode(), "event")


BAD = {
    "malformed JSON": b'{"event_id": "m1", "type": ',
    "missing field: user_id": json.dumps({"event_id": "m2", "type": "Clicked", "lottery_id": 1,
                                          "event_time": AT.format(4)}).encode(),
    "invalid field: amount (expected bigint)": json.dumps({"event_id": "m3", "type": "CouponsBought", "user_id": 5,
                                                           "amount": "two", "event_time": AT.format(4)}).encode(),
    "invalid field: type (must be CouponsBought or Clicked)": json.dumps(
        {"event_id": "m4", "type": "LotteryStarted", "user_id": 5, "event_time": AT.format(4)}).encode(),
}


def test_a_late_click_is_rejected_and_bad_records_are_dead_lettered_while_the_job_keeps_running(
        spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    query = runner.start(spark, lottery, bootstrap, str(tmp_path / "cp"), trigger_interval="500 milliseconds")
    try:
        send(bootstrap, [event("s1", "LotteryStarted", 0, lottery_id=1),
                         event("b1", "CouponsBought", 1, user_id=5, amount=2),
                         event("c1", "Clicked", 2, user_id=5, lottery_id=1),
                         event("clock1", "LotteryStarted", 30, lottery_id=2)], progress=False)
        wait_for(lambda: any(k.startswith("winner 1") for k in outcomes(bootstrap)), 120,
                 "the winner of lottery 1's first window (the watermark is then at 20 s)")

        bad = [Record(lottery.USER_TOPIC, b"5", value, "bad") for value in BAD.values()]
        send(bootstrap, [event("late", "Clicked", 3, user_id=5, lottery_id=1)] + bad +
             [event("neg", "CouponsBought", 25, user_id=5, amount=-1),
              event("clock2", "LotteryStarted", 40, lottery_id=3)], progress=False)
        wait_for(lambda: "rejection neg" in outcomes(bootstrap), 120, "the negative purchase's rejection")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()

    got = outcomes(bootstrap)
    assert got["rejection late"]["rule"] == LATE
    assert got["rejection late"]["message"] == "Late click behind the watermark, lotteryId: 1"
    assert got["rejection neg"]["message"] == "Cannot buy negative amount of coupons"
    assert got["winner 1 2026-01-01T00:00:00+00:00"]["winning_event_id"] == "c1"
    letters = [json.loads(r.value) for r in read_topics(bootstrap, [lottery.DEAD_LETTERS_TOPIC])]
    assert sorted(letter["reason"] for letter in letters) == sorted(BAD)
    assert {letter["job"] for letter in letters} == {"lottery"}
    report = verify("lottery", bootstrap)
    assert report.ok, "\n".join(report.lines())


def test_an_event_from_the_future_is_dead_lettered_and_never_makes_valid_events_late(spark, bootstrap, tmp_path):
    """One LotteryStarted stamped years ahead would move the watermark past every real event: each
    click after it would be rejected as late. The guard dead-letters it instead (its time is beyond
    the record's Kafka timestamp + $LAB_MAX_EVENT_SKEW), so the next micro-batch's click wins."""
    from joinlab.kit.events import Skew
    setup_topics(bootstrap)
    poison = Record(lottery.LOTTERY_TOPIC, b"9", json.dumps(
        {"event_id": "future", "type": "LotteryStarted", "lottery_id": 9,
         "event_time": "2031-01-01T00:00:00Z"}).encode(), "bad")
    send(bootstrap, [event("s1", "LotteryStarted", 0, lottery_id=1), event("b1", "CouponsBought", 1, user_id=5, amount=2),
                     poison], progress=False)
    run_to_end(spark, bootstrap, tmp_path / "cp")
    send(bootstrap, [event("c1", "Clicked", 2, user_id=5, lottery_id=1),
                     event("clock1", "LotteryStarted", 30, lottery_id=2)], progress=False)
    run_to_end(spark, bootstrap, tmp_path / "cp")

    got = outcomes(bootstrap)
    assert "rejection c1" not in got, "the click was judged against the future event's watermark"
    assert got["winner 1 2026-01-01T00:00:00+00:00"]["winning_event_id"] == "c1"
    letters = [json.loads(r.value) for r in read_topics(bootstrap, [lottery.DEAD_LETTERS_TOPIC])]
    assert [(letter["reason"], letter["key"]) for letter in letters] == [(Skew.configured().reason, "9")]
    report = verify("lottery", bootstrap)
    assert report.ok, "\n".join(report.lines())
