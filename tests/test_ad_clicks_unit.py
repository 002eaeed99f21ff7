"""Pure-logic tests of ad clicks' batch reference and generator: plain Python, no Spark session, no
broker. The join itself is Spark's; the reference models its watermark rules per record (Spark's
minimum of the two sides', a side with no events at 0, late at or behind it, an impression decided
unclicked only strictly past its minute), and these tests pin those rules on hand-made records, so
that a change to the reference that breaks one fails here, not only against a live run. The
interview's scenarios run the same rules against Spark itself (tests/test_interview.py)."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from generators.ad_clicks import FIRST_CLICK_ID, FIRST_IMPRESSION_ID, generate
from jobs.ad_clicks.given import ATTRIBUTION, DELAY
from jobs.ad_clicks.job import CLICKS_TOPIC, IMPRESSIONS_TOPIC, OUTPUT_TOPIC
from joinlab.kit.events import micros
from joinlab.generate import Disorder, Record
from joinlab.topics import Consumed
from references.ad_clicks import arrivals, expected, final_watermark_ms, late, notes

T = datetime(2026, 1, 1, tzinfo=timezone.utc)
MS = timedelta(milliseconds=1)


def at(seconds: float) -> str:
    return (T + timedelta(seconds=seconds)).isoformat()


def impression(impression_id: int, seconds: float, ad_id: int = 7) -> Record:
    body = {"impression_id": impression_id, "ad_id": ad_id, "placement": "news/feed", "event_time": at(seconds)}
    return Record(IMPRESSIONS_TOPIC, str(impression_id).encode(), json.dumps(body).encode(), "event")


def click(click_id: int, impression_id: int, seconds: float) -> Record:
    body = {"click_id": click_id, "impression_id": impression_id, "event_time": at(seconds)}
    return Record(CLICKS_TOPIC, str(impression_id).encode(), json.dumps(body).encode(), "event")


def clicks_of(records) -> dict:
    """impression_id -> click_id as the reference ends (None: emitted unclicked)."""
    return {key: view["click_id"] for key, view in expected(records).items()}


# Both sides at `seconds`: the watermark (their minimum - DELAY) moves to `seconds` - 10 s.
def both_sides_at(seconds: float, impression_id: int = 900) -> list[Record]:
    return [impression(impression_id, seconds), click(90_000 + impression_id, impression_id, seconds)]


# --- The join's rules ------------------------------------------------------------------------

def test_a_click_within_the_minute_after_its_impression_matches_whichever_arrives_first():
    assert clicks_of([impression(1, 0), click(101, 1, 30)]) == {1: 101}
    assert clicks_of([click(101, 1, 30), impression(1, 0)]) == {1: 101}, "a click may be read before its impression"


def test_the_minute_includes_both_ends_and_nothing_outside_it():
    records = [impression(1, 0), click(101, 1, 0), impression(2, 0), click(201, 2, 60),
               impression(3, 0), click(301, 3, 60 + 0.001), impression(4, 5), click(401, 4, 5 - 0.001),
               *both_sides_at(90)]
    got = clicks_of(records)
    assert got[1] == 101 and got[2] == 201, "at the impression's moment and exactly a minute after: both count"
    assert got[3] is None and got[4] is None, "a millisecond past the minute, or before the impression: neither"


def test_nothing_is_late_while_a_side_has_no_events():
    """Spark counts a side with no events as a watermark of 0: impressions alone, however far
    ahead, move nothing, and a click far behind them is on time."""
    records = [impression(1, 0), impression(2, 600), impression(3, 1200), click(101, 1, 10)]
    found, final = arrivals(records)
    assert [a.watermark_us for a in found] == [None] * 4 and final is not None
    assert late(records) == [] and clicks_of(records) == {1: 101}
    assert final_watermark_ms(records[:3]) is None, "impressions alone: no watermark at all"


def test_the_watermark_is_the_older_side_s_newest_event_time_less_the_delay():
    records = [impression(1, 0), impression(2, 300), click(201, 2, 40)]
    assert final_watermark_ms(records) == micros(T + timedelta(seconds=40) - DELAY) // 1000


def test_an_event_at_or_behind_the_watermark_is_late_and_its_click_lost():
    """After both sides reached 40 s the watermark is 30 s: a click at 30 s is late (Spark drops
    it, "at or behind"), one a millisecond later is not."""
    on_the_mark = [impression(1, 0), *both_sides_at(40), click(101, 1, 30)]
    just_after = [impression(1, 0), *both_sides_at(40), click(101, 1, 30 + 0.001)]
    assert [a.event["click_id"] for a in late(on_the_mark)] == [101]
    assert late(just_after) == []
    decided = both_sides_at(80, impression_id=901)  # the watermark to 70 s: impression 1 decided
    assert clicks_of(on_the_mark + decided)[1] is None, "its only click was late: it comes out unclicked"
    assert clicks_of(just_after + decided)[1] == 101


def test_a_late_impression_is_dropped_too():
    records = [*both_sides_at(40), impression(1, 20), click(101, 1, 41)]
    assert [a.topic for a in late(records)] == [IMPRESSIONS_TOPIC]
    assert 1 not in expected(records + both_sides_at(200, impression_id=901))


def test_an_unclicked_impression_is_decided_only_strictly_past_its_minute():
    """Spark keeps an impression while the watermark equals its time + the minute: a click at that
    very moment would still be on time."""
    mark = ATTRIBUTION + DELAY  # both sides here put the watermark exactly on impression 1's minute
    at_the_minute = [impression(1, 0), *both_sides_at(mark.total_seconds())]
    past_it = [impression(1, 0), *both_sides_at((mark + MS).total_seconds())]
    assert final_watermark_ms(at_the_minute) == micros(T + ATTRIBUTION) // 1000
    assert 1 not in expected(at_the_minute), "undecided: a click could still come"
    assert clicks_of(past_it)[1] is None


def test_duplicates_give_one_view_and_of_two_clicks_the_later_one_is_kept():
    records = [impression(1, 0), impression(1, 0), click(101, 1, 5), click(101, 1, 5), click(102, 1, 20),
               *both_sides_at(200)]
    views = expected(records)
    assert views[1]["click_id"] == 102 and views[1]["click_time"] == T + timedelta(seconds=20)


def test_records_of_one_kafka_timestamp_arrive_together():
    """Read back from topics, records carry their Kafka timestamp: those of one timestamp reach one
    micro-batch, so none of them moves the watermark for another."""
    def read(record: Record, second: int) -> Consumed:  # produced `second` s after T (not before its event time)
        return Consumed(record.topic, 0, 0, record.key, record.value, micros(T) // 1000 + second * 1000)
    early = [read(impression(1, 0), 50), read(impression(2, 40), 60), read(click(201, 2, 45), 60)]
    assert late(early + [read(click(101, 1, 20), 60)]) == [], "with the events that move the watermark: on time"
    assert [a.event["click_id"] for a in late(early + [read(click(101, 1, 20), 61)])] == [101]


def test_invalid_records_are_not_events():
    broken = Record(CLICKS_TOPIC, b"1", b'{"click_id": 101, "impression_id": 0, "event_time": "x"}', "malformed")
    assert arrivals([impression(1, 0), broken])[0][-1].topic == IMPRESSIONS_TOPIC


def test_notes_count_the_output_s_clicked_and_unclicked_impressions():
    def out(impression_id, click_id):
        view = {"impression_id": impression_id, "ad_id": 7, "placement": "news/feed", "impression_time": at(0),
                "click_id": click_id, "click_time": click_id and at(5)}
        return Consumed(OUTPUT_TOPIC, 0, 0, str(impression_id).encode(), json.dumps(view).encode(), 1)
    assert notes([out(1, 101), out(2, None), out(3, None)]) == [
        "1 impressions with their click, 2 emitted unclicked (once the watermark passed them by 60 s)"]
    assert notes([]) == []


# --- The generator ---------------------------------------------------------------------------

def events(records) -> tuple[dict, list]:
    """impression_id -> impression, and the clicks, of a generator's valid records."""
    bodies = [(r.topic, json.loads(r.value)) for r in records if r.kind == "event"]
    return ({b["impression_id"]: b for t, b in bodies if t == IMPRESSIONS_TOPIC},
            [b for t, b in bodies if t == CLICKS_TOPIC])


def test_the_generator_is_seeded_and_deterministic():
    assert generate(7, 300) == generate(7, 300)
    assert generate(7, 300) != generate(8, 300)


def test_clicks_fall_within_the_minute_except_slow_ones_which_come_after_it():
    for slow, inside in ((0.0, True), (1.0, False)):
        impressions, clicks = events(generate(3, 600, click_rate=0.5, slow_clicks=slow))
        assert len(clicks) > 100
        for c in clicks:
            after = micros(c["event_time"]) - micros(impressions[c["impression_id"]]["event_time"])
            window = ATTRIBUTION // timedelta(microseconds=1)
            assert (0 <= after <= window) if inside else (window < after <= 2 * window), (c, after)


def test_the_generator_s_shape_ids_keys_and_rate():
    records = generate(5, 1000, click_rate=0.25, rate=10.0)
    impressions, clicks = events(records)
    assert len(impressions) == 800 and 150 < len(clicks) < 250  # count / (1 + click_rate) impressions
    assert min(impressions) == FIRST_IMPRESSION_ID and min(c["click_id"] for c in clicks) == FIRST_CLICK_ID
    assert all(r.key == str(json.loads(r.value)["impression_id"]).encode() for r in records), "keyed by impression"
    times = sorted(micros(i["event_time"]) for i in impressions.values())
    assert (times[-1] - times[0]) / 1e6 == pytest.approx(1000 / 10.0, rel=0.01), "event time at `rate` events/s"
    assert events(generate(5, 100, click_rate=0.0))[1] == []


def test_the_lab_s_disorder_stays_within_the_delay_so_no_record_is_late():
    """The live stage and the demo send these: the reference agrees with Spark's micro-batches
    exactly where no record is late per record (references/ad_clicks.py)."""
    records = generate(7, 1200, disorder=Disorder(delayed=0.3, max_delay_s=5.0, duplicates=0.05, malformed=0.01))
    assert late(records) == []
    views = expected(records)
    impressions, clicks = events(records)
    in_window = {c["impression_id"]: c["click_id"] for c in clicks
                 if micros(c["event_time"]) - micros(impressions[c["impression_id"]]["event_time"])
                 <= ATTRIBUTION // timedelta(microseconds=1)}
    assert {k: v["click_id"] for k, v in views.items() if v["click_id"]} == in_window, "every timely click counted"
    assert sum(v["click_id"] is None for v in views.values()) > 100, "and the unclicked ones decided"


@pytest.mark.parametrize("kwargs", [{"count": 0}, {"click_rate": 1.5}, {"slow_clicks": -0.1}, {"ads": 0},
                                    {"rate": 0}])
def test_the_generator_refuses_nonsense(kwargs):
    with pytest.raises(ValueError):
        generate(1, **{"count": 10, **kwargs})
