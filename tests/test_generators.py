"""The generators without a broker: deterministic, valid where they should be, disordered as asked."""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import datetime, timezone

import pytest

from generators import tweet_views
from generators.tweet_views import SCHEMAS, generate
from jobs.tweet_views import TWEETS_TOPIC, USERS_TOPIC
from joinlab.events import parse_time, validate
from joinlab.generate import MALFORMED_KINDS, Disorder, Event, arrange, iso

MESSY = Disorder(delayed=0.3, max_delay_s=5.0, duplicates=0.05, malformed=0.02)


@pytest.fixture(scope="module")
def messy():
    return generate(7, 2000, disorder=MESSY)


def bodies(records, topic):
    return [json.loads(r.value) for r in records if r.kind == "event" and r.topic == topic]


def test_same_seed_same_bytes():
    assert generate(3, 500, disorder=MESSY) == generate(3, 500, disorder=MESSY)


def test_different_seed_different_records():
    assert generate(3, 500, disorder=MESSY) != generate(4, 500, disorder=MESSY)


def test_valid_records_pass_and_malformed_fail(messy):
    kinds = Counter(r.kind for r in messy)
    assert set(MALFORMED_KINDS) <= set(kinds), kinds
    for r in messy:
        event, reason = validate(SCHEMAS[r.topic], r.value)
        if r.kind in ("event", "duplicate"):
            assert reason is None, (r, reason)
        else:
            assert event is None and reason, r
        assert r.topic in (USERS_TOPIC, TWEETS_TOPIC) and r.key.decode().isdigit()


def test_malformed_records_carry_the_key_of_a_real_event(messy):
    keys = {(r.topic, r.key) for r in messy if r.kind == "event"}
    assert all((r.topic, r.key) in keys for r in messy if r.kind in MALFORMED_KINDS)


def test_counts_follow_the_fractions(messy):
    kinds = Counter(r.kind for r in messy)
    events = kinds["event"]
    assert abs(events - 2000) <= 5
    assert kinds["duplicate"] == round(0.05 * events)
    assert sum(kinds[k] for k in MALFORMED_KINDS) == round(0.02 * events)


def test_duplicates_are_identical_copies_arriving_later(messy):
    first_seen = {}
    for i, r in enumerate(messy):
        if r.kind == "event":
            first_seen[(r.topic, r.key, r.value)] = i
    for i, r in enumerate(messy):
        if r.kind == "duplicate":
            assert first_seen[(r.topic, r.key, r.value)] < i


def test_keys_match_ids(messy):
    for r in messy:
        if r.kind == "event":
            body = json.loads(r.value)
            assert r.key == str(body["user_id" if r.topic == USERS_TOPIC else "tweet_id"]).encode()


def test_versions_are_1_to_n_in_event_time_order(messy):
    for topic, id_field in ((USERS_TOPIC, "user_id"), (TWEETS_TOPIC, "tweet_id")):
        by_entity = defaultdict(list)
        for body in sorted(bodies(messy, topic), key=lambda b: b["event_time"]):
            by_entity[body[id_field]].append(body["version"])
        assert by_entity
        for versions in by_entity.values():
            assert versions == list(range(1, len(versions) + 1))
    assert any(len(v) > 1 for v in by_entity.values())  # some tweets were edited


def test_authors_exist_before_their_tweets_and_never_change(messy):
    created = {}
    for body in bodies(messy, USERS_TOPIC):
        created[body["user_id"]] = min(created.get(body["user_id"], body["event_time"]), body["event_time"])
    authors = defaultdict(set)
    for body in bodies(messy, TWEETS_TOPIC):
        assert body["user_id"] in created and created[body["user_id"]] < body["event_time"]
        authors[body["tweet_id"]].add(body["user_id"])
    assert all(len(a) == 1 for a in authors.values())


def test_profile_updates_come_after_the_users_tweets(messy):
    last_tweet = defaultdict(str)
    for body in bodies(messy, TWEETS_TOPIC):
        last_tweet[body["user_id"]] = max(last_tweet[body["user_id"]], body["event_time"])
    updates = [b for b in bodies(messy, USERS_TOPIC) if b["version"] > 1]
    assert updates
    assert all(b["event_time"] > last_tweet[b["user_id"]] for b in updates)


def test_users_and_count_knobs():
    records = generate(1, 1000, users=50, user_updates=0.0, tweet_edits=0.0)
    users = bodies(records, USERS_TOPIC)
    assert len(users) == 50 and all(b["version"] == 1 for b in users)
    assert len(records) == 1000


def test_tweets_first_puts_every_tweet_before_every_user():
    records = generate(5, 1000, tweets_first=True, disorder=MESSY)
    topics = [r.topic for r in records]
    assert topics.index(USERS_TOPIC) > len(topics) - 1 - topics[::-1].index(TWEETS_TOPIC)


def event_times(records):
    return [parse_time(json.loads(r.value)["event_time"]) for r in records if r.kind == "event"]


def test_no_delay_keeps_event_time_order():
    times = event_times(generate(2, 1000, disorder=Disorder(duplicates=0.1, malformed=0.05)))
    assert times == sorted(times)


def test_delays_reorder_some_events_within_the_max_delay():
    times = event_times(generate(2, 1000, disorder=Disorder(delayed=0.3, max_delay_s=0.5)))
    assert times != sorted(times)
    latest = times[0]
    for t in times:  # an event arrives no later than max_delay after a newer one was seen
        assert (latest - t).total_seconds() <= 0.5
        latest = max(latest, t)


def test_event_clock_and_iso_format():
    assert iso(datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc)) == "2026-01-01T00:00:00.123Z"
    times = sorted(event_times(generate(2, 100, rate=10.0)))
    assert times[0] == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert (times[-1] - times[0]).total_seconds() == pytest.approx((len(times) - 1) / 10.0)


def test_arrange_covers_every_malformed_kind_with_few_events():
    schema = SCHEMAS[USERS_TOPIC]
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    events = [Event(USERS_TOPIC, i, {"user_id": i, "name": "n", "handle": "h", "version": 1,
                                     "event_time": iso(at)}, at) for i in range(1, 7)]
    records = arrange(events, Disorder(malformed=1.0), random.Random(0), SCHEMAS)
    assert [r.kind for r in records].count("event") == 6
    assert sorted(r.kind for r in records if r.kind != "event") == sorted(MALFORMED_KINDS)
    assert all(validate(schema, r.value)[1] for r in records if r.kind != "event")


def test_disorder_rejects_nonsense():
    with pytest.raises(ValueError, match="max-delay"):
        Disorder(delayed=0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        Disorder(duplicates=1.5)


@pytest.mark.parametrize("argv, message", [
    (["--duration", "10"], "--duration needs --rate"),
    (["--duration", "10", "--rate", "5", "--count", "9"], "either --count or --duration"),
    (["--delayed", "0.2"], "--max-delay"),
    (["--duplicates", "2"], "between 0 and 1"),
    (["--count", "0"], "must be > 0"),
    (["--count", "10", "--users", "11"], "--users must be between"),
])
def test_cli_errors_say_what_to_do(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tweet_views.main(argv + ["--bootstrap", "127.0.0.1:1"])
    assert exit_info.value.code != 0
    assert message in capsys.readouterr().err
