"""Pure-logic tests of the three lottery stages with pyspark's in-memory TwsTester: no Spark
session, no broker. `Pipeline` (joinlab.kit.in_memory) runs the stages as the query does, one micro-batch at a time:
stage 1's watermark is the batch's, stage 2 and 3 take their input first and then fire their
timers (Spark handles a batch's input before its timers)."""
import json
import random
from datetime import datetime, timezone

import pytest
from pyspark.sql import Row

from generators.lottery import generate
from jobs.lottery.job import LOTTERY_EVENTS, LOTTERY_TOPIC, USER_EVENTS, USER_TOPIC
from jobs.lottery.in_memory import InMemory as Lottery
from jobs.lottery.in_memory import event_row as stage_row
from jobs.lottery.rules import (ALREADY_STARTED, BOUGHT, CLICKED, INACTIVE, LATE, NO_COUPON, NON_POSITIVE, STARTED,
                                Settings, draw, settings)
from jobs.lottery.given import LOTTERY, REJECTION, USER, WINNER
from joinlab.config import duration_ms
from joinlab.kit.events import micros, moment, validate
from joinlab.generate import Disorder, Record, arrive_first
from references import lottery as reference
from tests.conftest import random_batches


def timers(tester, key) -> list[int]:
    """The timers a stage's key has registered (TwsTester shows them only to its handle)."""
    return list(tester.handle._timers.listTimers(key))


SEED, DELAY_MS = 7, 10_000
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T0_US = micros(T0)


def at(seconds: float) -> int:
    """Microseconds of T0 + seconds."""
    return T0_US + round(seconds * 1_000_000)


def ms(seconds: float) -> int:
    return at(seconds) // 1000


def event_row(event_id, kind, t_us, lottery_id=None, user_id=None, amount=None) -> Row:
    schema = LOTTERY_EVENTS if kind == STARTED else USER_EVENTS
    return stage_row(schema, {"event_id": event_id, "type": kind, "event_time": moment(t_us), "lottery_id": lottery_id,
                              "user_id": user_id, "amount": amount})


def Pipeline(seed: int = SEED, delay_ms: int = DELAY_MS) -> Lottery:
    return Lottery(seed=seed, delay_ms=delay_ms)


def start(event_id, lottery, s):
    return event_row(event_id, STARTED, at(s), lottery_id=lottery)


def buy(event_id, user, amount, s):
    return event_row(event_id, BOUGHT, at(s), user_id=user, amount=amount)


def click(event_id, user, lottery, s):
    return event_row(event_id, CLICKED, at(s), lottery_id=lottery, user_id=user)


def rejections(rows) -> dict[str, tuple[str, str]]:
    return {r.event_id: (r.rule, r.message) for r in rows if r.kind == REJECTION}


def winners(rows) -> list[Row]:
    return [r for r in rows if r.kind == WINNER]


# --- Each rule and its message ------------------------------------------------------------------

def test_a_second_start_is_rejected_and_the_first_in_event_time_wins():
    p = Pipeline()
    out = p.run([[start("s2", 1, 5.0), start("s1", 1, 2.0)], [start("clock", 2, 30.0)]])
    assert rejections(out) == {"s2": (ALREADY_STARTED, "Cannot start already started lottery, lotteryId: 1")}
    assert p.gate.peekValueState("started", (LOTTERY, 1)) == (at(2.0),)


def test_a_click_counts_only_if_its_lottery_started_at_or_before_it_whatever_arrived_first():
    p = Pipeline()
    out = p.run([[buy("b", 9, 5, 0.0), click("c-before", 9, 1, 1.0), click("c-same", 9, 1, 3.0)],
                 [start("s", 1, 3.0), click("c-after", 9, 1, 4.0), click("c-other", 9, 2, 4.5)],
                 [start("clock", 3, 60.0)]])
    assert rejections(out) == {"c-before": (INACTIVE, "Cannot click on inactive lottery, lotteryId: 1"),
                               "c-other": (INACTIVE, "Cannot click on inactive lottery, lotteryId: 2")}
    [win] = [w for w in winners(out) if w.lottery_id == 1]
    assert win.entrants == 2 and win.winning_event_id in ("c-same", "c-after")


def test_buying_zero_or_a_negative_amount_is_rejected():
    out = Pipeline().run([[buy("zero", 4, 0, 1.0), buy("neg", 4, -3, 2.0), buy("ok", 4, 1, 3.0)],
                          [start("clock", 1, 60.0)]])
    assert rejections(out) == {"zero": (NON_POSITIVE, "Cannot buy negative amount of coupons"),
                               "neg": (NON_POSITIVE, "Cannot buy negative amount of coupons")}


def test_a_click_without_a_coupon_is_rejected_with_the_user_id():
    out = Pipeline().run([[start("s", 1, 0.0), click("c", 12, 1, 1.0)], [start("clock", 2, 60.0)]])
    assert rejections(out) == {"c": (NO_COUPON, "User has no coupon, userId: 12")}


def test_one_coupon_is_one_click_the_original_post_decrement_let_a_user_click_forever():
    p = Pipeline()
    out = p.run([[start("s", 1, 0.0), buy("b", 5, 1, 1.0)] + [click(f"c{i}", 5, 1, 2.0 + i) for i in range(3)],
                 [start("clock", 2, 60.0)]])
    assert rejections(out) == {"c1": (NO_COUPON, "User has no coupon, userId: 5"),
                               "c2": (NO_COUPON, "User has no coupon, userId: 5")}
    assert [(w.winning_event_id, w.entrants) for w in winners(out)] == [("c0", 1)]
    assert p.coupons.peekValueState("coupons", (USER, 5)) == (0,)


def test_coupons_are_spent_in_event_time_order_not_arrival_order():
    """A purchase that arrives first but happened after the click does not pay for it."""
    out = Pipeline().run([[start("s", 1, 0.0), buy("b", 5, 1, 3.0)], [click("c", 5, 1, 2.0)],
                          [start("clock", 2, 60.0)]])
    assert rejections(out) == {"c": (NO_COUPON, "User has no coupon, userId: 5")}


def test_an_event_behind_the_watermark_is_rejected_with_its_own_reason_and_nothing_else_moves():
    p = Pipeline()
    p.batch([start("s", 1, 0.0), buy("b", 5, 2, 1.0), start("clock", 2, 30.0)])
    late = p.batch([click("late", 5, 1, 2.0), buy("late-buy", 5, 9, 19.0), start("late-start", 3, 20.0)])
    assert p.clock.watermark == ms(20.0)
    assert rejections(late) == {"late": (LATE, "Late click behind the watermark, lotteryId: 1"),
                                "late-buy": (LATE, "Late coupon purchase behind the watermark, userId: 5"),
                                "late-start": (LATE, "Late lottery start behind the watermark, lotteryId: 3")}
    assert p.coupons.peekValueState("coupons", (USER, 5)) == (2,)  # the late click spent nothing
    assert winners(late) == []


def test_duplicate_event_ids_are_dropped_within_and_across_batches():
    p = Pipeline()
    first = [start("s", 1, 0.0), buy("b", 5, 1, 1.0), click("c", 5, 1, 2.0)]
    out = p.batch(first + first) + p.batch(first) + p.batch([start("clock", 2, 60.0)]) + p.batch(first)
    assert rejections(out) == {} and [(w.winning_event_id, w.entrants) for w in winners(out)] == [("c", 1)]


def test_clicks_fall_into_10_second_windows_drawn_only_when_the_watermark_reaches_the_end():
    p = Pipeline()
    p.batch([start("s", 1, 0.0), buy("b", 5, 9, 0.5)] +
            [click(f"c{s}", 5, 1, s) for s in (1.0, 9.999, 10.0, 19.999)])
    assert winners(p.batch([], watermark=ms(10.0) - 1)) == []
    [first] = winners(p.batch([], watermark=ms(10.0)))
    assert (first.window_start_us, first.entrants) == (at(0.0), 2)
    assert first.winning_event_id in ("c1.0", "c9.999")
    assert winners(p.batch([], watermark=ms(19.999))) == []
    [second] = winners(p.batch([], watermark=ms(20.0)))
    assert (second.window_start_us, second.entrants, second.seed) == (at(10.0), 2, SEED)


def test_the_draw_is_seeded_and_ignores_the_order_entrants_came_in():
    entrants = [(at(i / 10), f"e{i}", 100 + i) for i in range(30)]
    shuffled = random.Random(3).sample(entrants, len(entrants))
    assert draw(1, 7, at(0), entrants) == draw(1, 7, at(0), shuffled)
    assert len({draw(seed, 7, at(0), entrants) for seed in range(20)}) > 5  # the seed matters
    assert len({draw(1, 7, at(10 * w), entrants) for w in range(20)}) > 5  # so does the window


def test_the_same_events_in_another_order_and_other_batches_give_the_same_winners():
    rows = [start("s", 1, 0.0)] + [buy(f"b{u}", u, 2, 0.5) for u in range(1, 9)]
    rows += [click(f"c{u}-{k}", u, 1, 1.0 + u / 10 + k) for u in range(1, 9) for k in range(2)]
    clock = [start("clock", 2, 60.0)]
    one = Pipeline().run([rows, clock])
    backwards = Pipeline().run([list(reversed(rows[10:])), list(reversed(rows[:10])), clock])
    assert as_views(one) == as_views(backwards) and len(winners(one)) == 1 and rejections(one) == {}


# --- Against the batch reference ------------------------------------------------------------------

SCHEMAS = {LOTTERY_TOPIC: LOTTERY_EVENTS, USER_TOPIC: USER_EVENTS}


def stage_rows(records) -> list[Row]:
    """Valid input records as the rows stage 1 gets (duplicates included)."""
    return Pipeline().rows(records)


def as_views(rows) -> dict:
    """The job's outcome rows as the reference's views, by the reference's keys."""
    return Pipeline().views(rows)


@pytest.fixture
def job_settings(monkeypatch):
    monkeypatch.setenv("LOTTERY_SEED", str(SEED))
    monkeypatch.setenv("LOTTERY_WATERMARK_DELAY", f"{DELAY_MS} ms")
    return settings()


WITHIN_THE_DELAY = Disorder(delayed=0.5, max_delay_s=4.0, duplicates=0.1, malformed=0.02)


@pytest.mark.parametrize("seed", range(5))
def test_random_batches_of_disordered_events_converge_to_the_reference(job_settings, seed):
    records = generate(seed, 1200, lotteries=3, users=40, disorder=WITHIN_THE_DELAY)
    out = Pipeline().run(random_batches(stage_rows(records), random.Random(seed)))
    want = reference.expected(records)
    rules = {v["rule"] for k, v in want.items() if k.startswith("rejection")}
    assert rules == {ALREADY_STARTED, NON_POSITIVE, INACTIVE, NO_COUPON}  # and none late: disorder < delay
    assert sum(k.startswith("winner") for k in want) >= 8
    assert as_views(out) == want


@pytest.mark.parametrize("seed", [5, 6])
def test_which_topic_is_read_first_does_not_change_any_outcome(monkeypatch, seed):
    """Every lottery event before any user event, and the other way round: with a watermark delay
    longer than the stream (and a last event far ahead to move the watermark past it all), the
    outcomes are the shuffled order's, and the reference's."""
    monkeypatch.setenv("LOTTERY_SEED", str(SEED))
    monkeypatch.setenv("LOTTERY_WATERMARK_DELAY", "2 hours")
    records = generate(seed, 1000, lotteries=3, users=40, disorder=WITHIN_THE_DELAY)
    far = {"event_id": "clock", "type": STARTED, "lottery_id": 99, "event_time": "2026-01-01T05:00:00Z"}
    clock = Record(LOTTERY_TOPIC, b"99", json.dumps(far).encode(), "event")
    results = []
    for first in (None, LOTTERY_TOPIC, USER_TOPIC):
        ordered = (records if first is None else arrive_first(records, [first])) + [clock]
        out = Pipeline(delay_ms=2 * 3600_000).run(random_batches(stage_rows(ordered), random.Random(seed)))
        results.append(as_views(out))
    assert results[0] == results[1] == results[2] == reference.expected(records + [clock])
    assert sum(k.startswith("winner") for k in results[0]) > 10


def test_the_reference_rejects_a_record_late_when_the_records_sent_before_it_passed_it(job_settings):
    def rec(body):
        topic = LOTTERY_TOPIC if body["type"] == STARTED else USER_TOPIC
        return Record(topic, b"k", json.dumps(body).encode(), "event")
    clock = rec({"event_id": "x", "type": STARTED, "lottery_id": 1, "event_time": "2026-01-01T00:01:00Z"})
    late = rec({"event_id": "y", "type": CLICKED, "user_id": 3, "lottery_id": 1, "event_time": "2026-01-01T00:00:50Z"})
    ok = rec({"event_id": "z", "type": CLICKED, "user_id": 3, "lottery_id": 1,
              "event_time": "2026-01-01T00:00:50.001Z"})
    want = reference.expected([clock, late, ok])
    assert want["rejection y"]["rule"] == LATE
    assert "rejection z" not in want  # after the final watermark (00:00:50): not decided yet


# --- Settings and the generator ------------------------------------------------------------------

def test_settings_come_from_the_environment_and_bad_values_say_what_to_give(monkeypatch):
    monkeypatch.setenv("LOTTERY_SEED", "123")
    monkeypatch.setenv("LOTTERY_WATERMARK_DELAY", "2 minutes")
    assert settings() == Settings(123, 120_000)
    assert duration_ms("500 ms") == 500 and duration_ms("5 seconds") == 5000
    with pytest.raises(ValueError, match="e.g. '10 seconds'"):
        duration_ms("soon")
    monkeypatch.setenv("LOTTERY_SEED", "lucky")
    with pytest.raises(ValueError, match="LOTTERY_SEED"):
        settings()


def test_shape_rules_are_dead_letter_reasons_not_rejections():
    def reason(topic, body):
        return validate(SCHEMAS[topic], json.dumps(body).encode())[1]
    base = {"event_id": "e", "user_id": 1, "event_time": "2026-01-01T00:00:00Z"}
    assert reason(USER_TOPIC, {**base, "type": "Won"}) == "invalid field: type (must be CouponsBought or Clicked)"
    assert reason(USER_TOPIC, {**base, "type": BOUGHT}) == "missing field: amount (CouponsBought needs it)"
    assert reason(USER_TOPIC, {**base, "type": CLICKED}) == "missing field: lottery_id (Clicked needs it)"
    assert reason(USER_TOPIC, {**base, "type": BOUGHT, "amount": -2}) is None  # a rule for the job: a rejection
    empty_id = {"event_id": "", "type": STARTED, "lottery_id": 1, "event_time": "2026-01-01T00:00:00Z"}
    assert reason(LOTTERY_TOPIC, empty_id) == "invalid field: event_id (must not be empty)"


def test_the_generator_is_seeded_keyed_by_entity_and_exercises_every_rule():
    assert generate(3, 600) == generate(3, 600) != generate(4, 600)
    records = generate(3, 3000)
    for record in records:
        body = json.loads(record.value)
        assert record.key == str(body["lottery_id"] if record.topic == LOTTERY_TOPIC else body["user_id"]).encode()
    rules = [v["rule"] for k, v in reference.expected(records).items() if k.startswith("rejection")]
    clicks = sum(json.loads(r.value)["type"] == CLICKED for r in records)
    for rule in (INACTIVE, NO_COUPON):
        assert 0.02 * clicks < rules.count(rule) < 0.12 * clicks, rule
    assert rules.count(ALREADY_STARTED) > 0 and rules.count(NON_POSITIVE) > 0


def test_an_identical_replayed_outcome_is_harmless_and_a_different_one_is_a_mismatch(job_settings):
    from joinlab.topics import Consumed
    from joinlab.verify import compare
    records = generate(2, 600, lotteries=2, users=20)
    want = reference.expected(records)
    key = next(k for k in want if k.startswith("winner"))
    view = want[key]
    body = dict(view, window_start=view["window_start"].isoformat(), window_end=view["window_end"].isoformat())
    out = [Consumed("lottery-winners", 0, i, b"k", json.dumps(body).encode(), 0) for i in range(2)]
    assert reference.actual(out) == {key: view}  # the at-least-once sink wrote it twice, identically
    other = dict(body, winner_user_id=body["winner_user_id"] + 1)
    out.append(Consumed("lottery-winners", 0, 2, b"k", json.dumps(other).encode(), 0))
    report = compare("lottery", {key: view}, reference.actual(out), reference.version)
    assert report.mismatched == [key] and not report.ok


# --- State and its bounds ---------------------------------------------------------------------------

def test_each_key_has_one_timer_at_its_earliest_pending_event_and_state_empties_as_the_watermark_passes():
    p = Pipeline()
    p.batch([start("s", 1, 0.0), buy("b", 5, 3, 0.5)] + [click(f"c{i}", 5, 1, 1.0 + i) for i in range(3)])
    assert timers(p.gate, (LOTTERY, 1)) == [ms(0.0)]  # five events held, one timer (not one per event)
    p.batch([start("clock", 2, 100.0)])
    p.batch([])  # the watermark passes them all
    assert p.gate.peekValueState("pending", (LOTTERY, 1))[1] == []  # every held event decided
    assert p.coupons.peekValueState("pending", (USER, 5)) is None and timers(p.coupons, (USER, 5)) == []
    assert p.draw.peekValueState("entries", (LOTTERY, 1)) is None and timers(p.draw, (LOTTERY, 1)) == []


def test_seen_ids_are_forgotten_once_the_watermark_passes_them_by_the_horizon_and_a_later_resend_is_late():
    from jobs.lottery.rules import DEDUP_HORIZON_US
    horizon_s = DEDUP_HORIZON_US / 1_000_000
    p = Pipeline()
    first = [start("s", 1, 0.0), buy("b", 5, 1, 1.0), click("c", 5, 1, 2.0)]
    out = p.batch(first) + p.batch([start("clock", 2, 30.0)])
    assert len(p.gate.peekMapState("seen", (LOTTERY, 1))) == 1  # one minute of ids, until the horizon
    out += p.batch(first) + p.batch([start("clock2", 3, horizon_s + 75.0)]) + p.batch([])
    assert rejections(out) == {} and p.gate.peekMapState("seen", (LOTTERY, 1)) == {}
    assert p.gate.peekMapState("seen", (USER, 5)) == {} and p.gate.peekValueState("pending", (USER, 5)) is None
    resent = p.batch([click("c", 5, 1, 2.0)])  # older than the horizon: behind the watermark, so late
    assert rejections(resent) == {"c": (LATE, "Late click behind the watermark, lotteryId: 1")}
    assert [(w.winning_event_id, w.entrants) for w in winners(out + resent)] == [("c", 1)]  # counted once


# --- State round trips per key and batch --------------------------------------------------------------

def _calls(clicks: int) -> dict:
    """Each stage's state and timer calls (Spark's per-call ones included) while one user buys
    `clicks` coupons and clicks one lottery that many times in one batch, then the watermark
    passes them all and their window is drawn."""
    from tests.state_calls import count
    p = Pipeline()
    calls = {stage: count(getattr(p, stage)) for stage in ("gate", "coupons", "draw")}
    p.batch([start("s", 1, 0.0), buy("b", 5, clicks, 0.5)] + [click(f"c{i}", 5, 1, 1.0 + i / 100) for i in range(clicks)])
    p.batch([start("clock", 2, 100.0)])
    assert [w.entrants for w in winners(p.batch([]))] == [clicks]
    return calls


def test_each_stage_makes_the_same_state_calls_per_key_and_batch_however_many_events_the_key_has():
    one, many = _calls(1), _calls(30)
    for stage in ("gate", "coupons", "draw"):
        assert many[stage] == one[stage], stage
    # the draw: its key's entries read once, written once, one timer, cleared as it fires in the same
    # batch (Spark fires a batch's timers after its input, on the same processor object: no second read)
    assert one["draw"] == {"(framework) setImplicitKey": 2, "entries.get": 1,
                           "entries.update": 1, "entries.clear": 1, "registerTimer": 1,
                           "(framework) deleteTimer": 1}
