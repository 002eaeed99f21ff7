"""The generators without a broker: deterministic, valid where they should be, disordered as asked."""
from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone

import pytest

from generators import money_enrichment, tweet_views
from generators.tweet_views import SCHEMAS, generate
from jobs.money_enrichment.job import SESSIONS_TOPIC, TRANSACTIONS_TOPIC
from jobs.money_enrichment.job import USERS_TOPIC as MONEY_USERS_TOPIC
from jobs.money_enrichment.rules import TYPES
from jobs.tweet_views.job import TWEETS_TOPIC, USERS_TOPIC
from joinlab.kit.events import parse_time, validate
from joinlab.generate import MALFORMED_KINDS, Disorder, Event, arrange, iso, summary

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


@pytest.mark.parametrize("generator, argv, message", [
    (tweet_views, ["--duration", "10"], "--duration needs --rate"),
    (tweet_views, ["--duration", "10", "--rate", "5", "--count", "9"], "either --count or --duration"),
    (tweet_views, ["--delayed", "0.2"], "--max-delay"),
    (tweet_views, ["--duplicates", "2"], "between 0 and 1"),
    (tweet_views, ["--count", "0"], "must be > 0"),
    (tweet_views, ["--count", "10", "--users", "11"], "--users must be between"),
    (money_enrichment, ["--before-session", "1.5"], "not between 0 and 1"),
    (money_enrichment, ["--very-late", "x"], "not a number"),
    (money_enrichment, ["--very-late", "-0.1"], "not between 0 and 1"),
    (money_enrichment, ["--late-by", "0"], "must be > 0"),
    (money_enrichment, ["--count", "20", "--users", "15"], "too small"),
])
def test_cli_errors_say_what_to_do(generator, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        generator.main(argv + ["--bootstrap", "127.0.0.1:1"])
    assert exit_info.value.code != 0
    assert message in capsys.readouterr().err


def test_arrival_delay_moves_an_event_and_what_follows_it():
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    events = [Event(USERS_TOPIC, i, {"user_id": i, "name": "n", "handle": "h", "version": 1,
                                     "event_time": iso(at)}, at, arrival_delay_s=100.0 if i == 1 else 0.0)
              for i in range(1, 5)]
    records = arrange(events, Disorder(duplicates=1.0, malformed=1.0), random.Random(0), SCHEMAS)
    first_late = next(i for i, r in enumerate(records) if r.key == b"1")
    assert all(r.key == b"1" for r in records[first_late:]) and len(records[first_late:]) == 3  # event, dup, bad


# --- money-enrichment -------------------------------------------------------------------------

MONEY_SCHEMAS = money_enrichment.SCHEMAS


def money_events(records):
    """(arrival index, topic, body, event time) of every valid event, in arrival order."""
    return [(i, r.topic, body, parse_time(body["event_time"]))
            for i, r in enumerate(records) if r.kind == "event" for body in [json.loads(r.value)]]


def by_topic(records, topic):
    return [body for _, t, body, _ in money_events(records) if t == topic]


@pytest.fixture(scope="module")
def money():
    return money_enrichment.generate(7, 4000)


def test_money_same_seed_same_bytes():
    assert money_enrichment.generate(3, 600, disorder=MESSY) == money_enrichment.generate(3, 600, disorder=MESSY)
    assert money_enrichment.generate(3, 600) != money_enrichment.generate(4, 600)


def test_money_valid_records_pass_and_malformed_fail():
    records = money_enrichment.generate(5, 2000, disorder=MESSY)
    kinds = Counter(r.kind for r in records)
    assert kinds["event"] == 2000 and set(MALFORMED_KINDS) <= set(kinds), kinds
    for r in records:
        event, reason = validate(MONEY_SCHEMAS[r.topic], r.value)
        if r.kind in ("event", "duplicate"):
            assert reason is None, (r, reason)
            assert r.key == str(event[{TRANSACTIONS_TOPIC: "tx_id", SESSIONS_TOPIC: "session_id",
                                       MONEY_USERS_TOPIC: "user_id"}[r.topic]]).encode()
        else:
            assert event is None and reason, r


def test_money_amounts_types_and_ids(money):
    txs = by_topic(money, TRANSACTIONS_TOPIC)
    assert all(isinstance(b["amount"], float) and b["amount"] > 0 and round(b["amount"], 2) == b["amount"]
               for b in txs)
    assert {b["type"] for b in txs} == set(TYPES)
    assert len({b["tx_id"] for b in txs}) == len(txs)
    per_user_type = Counter((b["user_id"], b["type"]) for b in txs)
    assert sum(n > 1 for n in per_user_type.values()) > len(per_user_type) // 2  # "first of a type" matters


def test_money_users_start_at_version_1_and_versions_follow_event_time(money):
    users = by_topic(money, MONEY_USERS_TOPIC)
    versions = defaultdict(list)
    for body in sorted(users, key=lambda b: (b["event_time"], b["version"])):
        versions[body["user_id"]].append(body)
    assert len(versions) == 40  # count / 100
    for updates in versions.values():
        assert [b["version"] for b in updates] == list(range(1, len(updates) + 1))
        assert updates[0]["event_time"] == "2026-01-01T00:00:00.000Z"
        assert all(a != {**b, "version": a["version"], "event_time": a["event_time"]}
                   for a, b in zip(updates[1:], updates))  # every update changes something
    assert len(users) - 40 == round(0.05 * 4000)


@pytest.mark.parametrize("session_seconds", [120.0, 30.0])
def test_money_transactions_fall_within_their_session(session_seconds):
    records = money_enrichment.generate(2, 3000, session_seconds=session_seconds)
    sessions = {b["session_id"]: b for b in by_topic(records, SESSIONS_TOPIC)}
    for body in by_topic(records, TRANSACTIONS_TOPIC):
        session = sessions[body["session_id"]]
        offset = (parse_time(body["event_time"]) - parse_time(session["event_time"])).total_seconds()
        assert 0 <= offset < session_seconds and body["user_id"] == session["user_id"]
    assert len(records) == 3000


@pytest.mark.parametrize("seed, count", [(1, 200), (2, 777), (3, 4000)])
def test_money_same_millisecond_cases_are_planted(seed, count):
    records = money_enrichment.generate(seed, count)
    users, txs = by_topic(records, MONEY_USERS_TOPIC), by_topic(records, TRANSACTIONS_TOPIC)
    tx_moments = {(b["user_id"], b["event_time"]) for b in txs}
    assert any((b["user_id"], b["event_time"]) in tx_moments for b in users if b["version"] > 1)
    same_ms = defaultdict(list)
    for b in users:
        same_ms[(b["user_id"], b["event_time"])].append(b["version"])
    assert any(len(v) > 1 and sorted(v)[1] == sorted(v)[0] + 1 for v in same_ms.values())
    pairs = Counter((b["user_id"], b["type"], b["event_time"]) for b in txs)
    assert any(n > 1 for n in pairs.values())


def first_arrivals(records):
    """session_id -> (arrival of its SessionStarted, arrival of its first transaction, first tx time)."""
    seen: dict = {}
    for i, topic, body, at in money_events(records):
        if topic == MONEY_USERS_TOPIC:
            continue
        entry = seen.setdefault(body["session_id"], [None, None, None])
        if topic == SESSIONS_TOPIC:
            entry[0] = (i, at)
        elif entry[1] is None:
            entry[1], entry[2] = i, at
    return seen


@pytest.mark.parametrize("share", [0.0, 0.1, 0.5])
def test_money_before_session_share_arrives_shortly_after_the_first_transaction(share):
    records = money_enrichment.generate(4, 3000, before_session=share)
    events = money_events(records)
    arrivals = first_arrivals(records)
    with_tx = [a for a in arrivals.values() if a[1] is not None]
    after = [a for a in with_tx if a[0][0] > a[1]]
    assert len(after) == round(share * len(with_tx))
    for (i, start), _, first_tx in after:  # joinable: within the wait limit (30 s) and watermark delay (10 s)
        assert first_tx - start <= timedelta(seconds=2)
        newest = max(at for _, _, _, at in events[:i])
        assert newest - first_tx <= timedelta(seconds=3.1)


@pytest.mark.parametrize("share, late_by", [(0.02, 200.0), (0.1, 150.0), (0.0, 200.0)])
def test_money_very_late_transactions_arrive_after_the_stream_moved_on(share, late_by):
    records = money_enrichment.generate(6, 6000, very_late=share, late_by_s=late_by)
    newest, late, lateness = None, [], []
    for _, topic, body, at in money_events(records):
        if newest is not None and newest > at:
            lateness.append(newest - at)
            if topic == TRANSACTIONS_TOPIC and newest - at > timedelta(seconds=late_by - 1):
                late.append(body)
        newest = at if newest is None else max(newest, at)
    assert len(late) == round(share * len(by_topic(records, TRANSACTIONS_TOPIC)))
    # everything else is on time but for before-session starts (a few seconds)
    assert len(lateness) - len(late) <= 0.1 * len(by_topic(records, SESSIONS_TOPIC))
    assert sorted(lateness)[len(lateness) - len(late) - 1] < timedelta(seconds=5)


def test_money_short_timeline_has_no_very_late_transactions():
    records = money_enrichment.generate(6, 300)  # 15 s + a session: never 200 s past any transaction
    newest = max(at for *_, at in money_events(records))
    assert all(newest - at < timedelta(seconds=200) for *_, at in money_events(records))


def test_money_summary_counts_every_kind():
    records = money_enrichment.generate(7, 1000, disorder=MESSY)
    assert summary(records).startswith("event=1000 duplicate=50 ")




@pytest.mark.parametrize("pattern", ["tweet-views", "car-pollution", "lottery", "money-enrichment"])
def test_a_run_continued_after_what_the_topics_hold_shares_no_id_and_comes_later(pattern):
    """A generator run again without --seed: the same seed's records, continued after the first run
    (as `produce` does from the topics), share no id or key with it and come later in event time."""
    from joinlab import patterns
    from joinlab.generate import Continuation
    first = patterns.generator(pattern).generate(42, 300, disorder=MESSY)
    events = [json.loads(r.value) for r in first if r.kind in ("event", "duplicate")]
    newest = max(parse_time(b["event_time"]) for b in events)
    second = Continuation(len(first), newest).apply(first)
    again = [json.loads(r.value) for r in second if r.kind in ("event", "duplicate")]
    ids = lambda bodies: {(n, v) for b in bodies for n, v in b.items() if n.endswith("_id")}  # noqa: E731
    assert ids(events) and not ids(events) & ids(again)
    assert not {r.key for r in first if r.kind == "event"} & {r.key for r in second if r.kind == "event"}
    assert min(parse_time(b["event_time"]) for b in again) > newest
    assert [r.kind for r in second] == [r.kind for r in first]  # the same story, moved
    unparsed = [r for r in first if r.kind in ("empty", "not-json", "truncated", "not-object")]
    assert unparsed and all(r in second for r in unparsed)  # no ids to move: dead letters either way
