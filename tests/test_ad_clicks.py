"""Ad clicks end to end: generator -> Kafka -> Spark's own stream-stream join -> Kafka -> verifier,
real parts only; and the grader's fast stage (the same query on a local file source) against the
reference.

Disorder stays within the watermark delay here (4 s + 1 s for a duplicate, against 10 s), so no
event is late and the views are a function of the events alone; the late click is a crafted
scenario, sent after the job has moved past it."""
import json

import pytest

import jobs.ad_clicks.parts as ad
from jobs.ad_clicks.consumer import actual
from jobs.ad_clicks.in_memory import InMemory
from generators.ad_clicks import generate
from joinlab import runner
from joinlab.generate import Disorder, Record, send
from joinlab.topics import create_topics, read_topics
from joinlab.verify import verify
from references import ad_clicks as reference
from tests.conftest import assert_dead_lettered, run_job_to_end, stop_mid_stream_and_resume, wait_for

pytestmark = pytest.mark.spark

WITHIN_THE_DELAY = Disorder(delayed=0.5, max_delay_s=4.0, duplicates=0.1, malformed=0.02)
AT = "2026-01-01T00:{:02d}:{:02d}Z"


def at(seconds: int) -> str:
    return AT.format(*divmod(seconds, 60))


def impression(impression_id: int, seconds: int) -> Record:
    body = {"impression_id": impression_id, "ad_id": 7, "placement": "news/feed", "event_time": at(seconds)}
    return Record(ad.IMPRESSIONS_TOPIC, str(impression_id).encode(), json.dumps(body).encode(), "event")


def click(click_id: int, impression_id: int, seconds: int) -> Record:
    body = {"click_id": click_id, "impression_id": impression_id, "event_time": at(seconds)}
    return Record(ad.CLICKS_TOPIC, str(impression_id).encode(), json.dumps(body).encode(), "event")


def views_of(bootstrap) -> dict:
    return actual(read_topics(bootstrap, [ad.OUTPUT_TOPIC]))


def progress_sum(query, field: str) -> int:
    return sum(op[field] for p in query.recentProgress for op in p["stateOperators"])


def watermark_reached(query, seconds: int) -> bool:
    mark = (query.lastProgress or {}).get("eventTime", {}).get("watermark")
    return mark is not None and mark >= at(seconds).replace("Z", ".000Z")


@pytest.mark.parametrize("seed", [1, 2])
def test_views_equal_the_reference_under_disorder_and_a_restart(spark, bootstrap, tmp_path, seed):
    create_topics(bootstrap, ad.INPUT_TOPICS + ad.OUTPUT_TOPICS)
    records = generate(seed, 1000, disorder=WITHIN_THE_DELAY)
    send(bootstrap, records, progress=False)
    stop_mid_stream_and_resume(spark, ad, bootstrap, str(tmp_path / "cp"), max_offsets_per_trigger=300)
    report = verify("ad-clicks", bootstrap)
    assert report.ok, "\n".join(report.lines())
    views = views_of(bootstrap)
    clicked = sum(v["click_id"] is not None for v in views.values())
    assert clicked > 150 and len(views) - clicked > 150, "want both clicked and unclicked impressions"
    assert not reference.late(records), "disorder within the delay: nothing is late"
    letters = read_topics(bootstrap, [ad.DEAD_LETTERS_TOPIC])
    assert len(letters) == sum(r.kind not in ("event", "duplicate") for r in records)


def test_a_late_click_is_dropped_counted_and_explained_and_its_impression_comes_out_unclicked(
        spark, bootstrap, tmp_path):
    """A click behind the watermark never reaches the join (Spark drops it and counts it in the
    progress); its impression is then emitted unclicked once the watermark passes it + 1 minute.
    The reference names the click and the watermark it met."""
    create_topics(bootstrap, ad.INPUT_TOPICS + ad.OUTPUT_TOPICS)
    query = runner.start(spark, ad, bootstrap, str(tmp_path / "cp"), trigger_interval="500 milliseconds")
    try:
        send(bootstrap, [impression(1, 0), impression(2, 5), click(200, 2, 6),
                         impression(3, 30), click(300, 3, 30)], progress=False)  # the watermark: 30 - 10 = 20 s
        wait_for(lambda: watermark_reached(query, 20), 120, "the watermark at 20 s")
        assert views_of(bootstrap).keys() == {2, 3}, "matched pairs come out at once; impression 1 waits"

        send(bootstrap, [click(100, 1, 15)], progress=False)  # 15 s: behind the watermark, though in impression 1's minute
        wait_for(lambda: progress_sum(query, "numRowsDroppedByWatermark") >= 1, 120, "the late click dropped")
        send(bootstrap, [impression(4, 80), click(400, 4, 80)], progress=False)  # the watermark: 70 s, past 0 + 60
        wait_for(lambda: 1 in views_of(bootstrap), 120, "impression 1, unclicked")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()

    assert views_of(bootstrap)[1]["click_id"] is None
    assert progress_sum(query, "numRowsDroppedByWatermark") == 1
    inputs = read_topics(bootstrap, ad.INPUT_TOPICS)
    late = reference.late(inputs)
    assert [(a.event.get("click_id"), a.watermark_us // 1_000_000 % 3600) for a in late] == [(100, 20)]
    report = verify("ad-clicks", bootstrap)
    assert report.ok, "\n".join(report.lines())


def test_the_join_state_rises_and_falls_with_the_watermark(spark, bootstrap, tmp_path):
    """Spark keeps both sides' rows until the watermark and the condition's range prove nothing can
    match them any more: state grows with the unclicked impressions, then falls to the rows the
    newest watermark cannot drop yet."""
    create_topics(bootstrap, ad.INPUT_TOPICS + ad.OUTPUT_TOPICS)
    query = runner.start(spark, ad, bootstrap, str(tmp_path / "cp"), trigger_interval="500 milliseconds")

    def rows_in_state():
        operators = query.lastProgress["stateOperators"]
        return operators[0]["numRowsTotal"] if operators else 0
    try:
        send(bootstrap, [impression(i, i) for i in range(1, 21)] + [click(1000 + i, i, i + 5) for i in range(1, 11)],
             progress=False)
        # The watermark moves to 5 s (the clicks' newest, 15 s, - 10 s): too little to drop any row.
        wait_for(lambda: query.lastProgress and rows_in_state() == 30, 120, "every impression and click kept")
        send(bootstrap, [impression(100, 300), click(10_000, 100, 300)], progress=False)  # the watermark: 290 s
        wait_for(lambda: watermark_reached(query, 290) and rows_in_state() < 30, 120, "the state dropped")
        assert rows_in_state() == 2, "only impression 100 and its click are still within reach"
    finally:
        query.stop()
    views = views_of(bootstrap)
    assert sorted(i for i, v in views.items() if v["click_id"] is None) == list(range(11, 21))


BAD = {
    "malformed JSON": b'{"impression_id": 5, ',
    "missing field: ad_id": json.dumps({"impression_id": 6, "placement": "x", "event_time": at(1)}).encode(),
    "invalid field: impression_id (must be >= 1)": json.dumps(
        {"impression_id": 0, "ad_id": 1, "placement": "x", "event_time": at(1)}).encode(),
}


def test_bad_records_are_dead_lettered_with_their_reason(spark, bootstrap, tmp_path):
    create_topics(bootstrap, ad.INPUT_TOPICS + ad.OUTPUT_TOPICS)
    send(bootstrap, [Record(ad.IMPRESSIONS_TOPIC, b"5", value, "bad") for value in BAD.values()]
         + [impression(1, 0), click(10, 1, 3)], progress=False)
    run_job_to_end(spark, ad, bootstrap, tmp_path / "cp")
    assert_dead_lettered(bootstrap, "ad-clicks", ad.DEAD_LETTERS_TOPIC, ad.IMPRESSIONS_TOPIC, BAD)
    assert views_of(bootstrap)[1]["click_id"] == 10


def test_the_fast_stage_runs_spark_and_equals_the_reference(spark):
    """The grader's fast stage for this pattern is the job's query on a local file source, a
    micro-batch per list of records: for any cut of the arrival order, the reference's views."""
    records = generate(3, 600, disorder=WITHIN_THE_DELAY)
    pipeline = InMemory()
    views = pipeline.views(pipeline.run([records[i:i + 120] for i in range(0, len(records), 120)]))
    assert views == reference.expected(records)
    assert sum(v["click_id"] is None for v in views.values()) > 50 and sum(v["click_id"] is not None for v in views.values()) > 50
