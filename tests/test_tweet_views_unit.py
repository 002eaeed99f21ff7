"""Pure-logic tests of TweetViewsProcessor with pyspark's in-memory TwsTester: no Spark session,
no broker - the analogue of Flink's operator harness tests."""
from collections import Counter
from datetime import datetime, timedelta, timezone

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from jobs.tweet_views.given import retention
from jobs.tweet_views.solution import Author, Tweet, TweetViewsProcessor, User
from joinlab.kit.typed_state import ddl
from tests.state_calls import count, sent_bytes

T = datetime(2026, 1, 1, tzinfo=timezone.utc)
RETENTION = retention()
NAIVE = datetime(2026, 1, 1, 0, 30)  # as Spark hands a stored time back: naive, local (the tests run in UTC)


def user(version, name="ann", user_id=1, at=T):
    return Row(side="user", user_id=user_id, version=version, event_time=at, tweet_id=None, text=None,
               name=name, handle=f"@{name}")


def tweet(tweet_id, version=1, text="hi", user_id=1, at=T):
    return Row(side="tweet", user_id=user_id, version=version, event_time=at, tweet_id=tweet_id, text=text,
               name=None, handle=None)


def stored(tester, user_id=1) -> Author:
    raw = tester.peekValueState("author", user_id)
    return Author(User(*raw[0]) if raw[0] else None, [Tweet(*t) for t in raw[1]], raw[2])


def views(out):
    return sorted((r.tweet_id, r.tweet_version, r.user_version, r.text, r.name) for r in out)


def test_a_tweet_before_its_author_waits_then_is_emitted_when_the_author_arrives():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    assert tester.test(1, [tweet(10)]) == []
    assert views(tester.test(1, [user(1)])) == [(10, 1, 1, "hi", "ann")]


def test_a_new_user_version_re_emits_every_stored_tweet():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    tester.test(1, [user(1)] + [tweet(t) for t in range(5)])
    out = tester.test(1, [user(2, name="anne")])
    assert views(out) == [(t, 1, 2, "hi", "anne") for t in range(5)]


def test_stale_and_duplicate_versions_are_ignored():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    tester.test(1, [user(3, name="new"), tweet(10, version=2, text="edited")])
    assert tester.test(1, [user(2, name="old"), user(3, name="new")]) == []
    assert tester.test(1, [tweet(10, version=1, text="first"), tweet(10, version=2, text="edited")]) == []
    assert stored(tester).user[:2] == (3, "new")


def test_a_tweet_edit_replaces_the_stored_tweet_and_emits_only_that_tweet():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    tester.test(1, [user(1), tweet(10), tweet(11)])
    assert views(tester.test(1, [tweet(10, version=2, text="edited")])) == [(10, 2, 1, "edited", "ann")]
    assert {t.tweet_id: (t.version, t.text) for t in stored(tester).tweets} == {10: (2, "edited"), 11: (1, "hi")}


def test_the_last_view_does_not_depend_on_the_order_within_a_batch():
    events = [tweet(10), user(2, name="b"), tweet(10, version=3, text="v3"), user(1, name="a"), tweet(10, version=2)]
    for ordering in (events, list(reversed(events))):
        out = TwsTester(TweetViewsProcessor(RETENTION)).test(1, ordering)
        assert views(out) == [(10, 3, 2, "v3", "b")]


def test_a_batch_reads_the_authors_state_once_and_writes_it_once_however_many_events_it_holds():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    calls = count(tester)
    tester.test(1, [user(1)] + [tweet(t) for t in range(50)] + [tweet(t, version=2) for t in range(50)])
    assert calls == {"(framework) setImplicitKey": 1, "author.get": 1, "author.update": 1}
    calls.clear()
    assert tester.test(1, [user(1), tweet(3)]) == []  # nothing new: read, no write
    assert calls == {"(framework) setImplicitKey": 1, "author.get": 1}


def test_a_batch_sends_the_authors_value_once_and_nothing_when_nothing_changed():
    """The bytes a batch's write sends are the author's value as stored, once, however many events
    the batch held: the state is one value per author (one round trip costs more than its bytes,
    docs/benchmarks.md); a batch that changes nothing sends none."""
    tester, written = TwsTester(TweetViewsProcessor(RETENTION)), Counter()
    count(tester, written=written)
    tester.test(1, [user(1)] + [tweet(t) for t in range(50)] + [tweet(t, version=2) for t in range(50)])
    assert written == {"author": sent_bytes(stored(tester))}
    written.clear()
    tester.test(1, [user(1), tweet(3, version=2)])
    assert written == {}


def test_the_state_ddl_is_derived_from_the_named_tuples():
    assert ddl(User) == "version bigint, name string, handle string, event_time timestamp"
    assert ddl(Author) == ("user struct<version bigint, name string, handle string, event_time timestamp>, "
                           "tweets array<struct<tweet_id bigint, version bigint, text string, event_time timestamp>>, "
                           "newest timestamp")


def test_a_profile_update_reaches_the_tweets_within_the_retention_before_it_and_state_keeps_twice_that():
    tester = TwsTester(TweetViewsProcessor(timedelta(hours=1)))
    tester.test(1, [user(1), tweet(10), tweet(11, at=T + timedelta(minutes=50))])
    tester.test(1, [tweet(12, at=T + timedelta(minutes=130))])  # tweet 10 is now 130 min behind: past 2 h
    assert sorted(t.tweet_id for t in stored(tester).tweets) == [11, 12]
    # 80 min after tweet 11, beyond its hour: only tweet 12 gets the new profile
    assert views(tester.test(1, [user(2, name="anne", at=T + timedelta(minutes=130))])) == [(12, 1, 2, "hi", "anne")]
    assert tester.test(1, [tweet(10, version=1, text="late")]) == []  # more than 2 h behind when it arrives
    assert sorted(t.tweet_id for t in stored(tester).tweets) == [11, 12]


def test_a_late_profile_update_still_reaches_a_tweet_the_other_topic_has_read_past():
    """The tweets topic is read 90 minutes ahead of the users topic: the update of minute 30 still
    reaches tweet 10 (minute 0), as it would have had the topics been read together."""
    tester = TwsTester(TweetViewsProcessor(timedelta(hours=1)))
    tester.test(1, [user(1), tweet(10)])
    tester.test(1, [tweet(20, at=T + timedelta(minutes=90))])
    assert views(tester.test(1, [user(2, name="anne", at=T + timedelta(minutes=30))])) == \
        [(10, 1, 2, "hi", "anne"), (20, 1, 2, "hi", "anne")]


def test_in_one_batch_of_a_backfill_a_tweet_gets_the_last_profile_within_its_retention():
    tester = TwsTester(TweetViewsProcessor(timedelta(hours=1)))
    out = tester.test(1, [user(3, name="c", at=T + timedelta(minutes=110)), tweet(10), user(1),
                          user(2, name="anne", at=T + timedelta(minutes=59)), tweet(11, at=T + timedelta(minutes=110))])
    assert views(out) == [(10, 1, 2, "hi", "anne"), (11, 1, 3, "hi", "c")]
    assert stored(tester).user.version == 3


def test_naive_and_aware_times_mix_as_spark_hands_them_over():
    tester = TwsTester(TweetViewsProcessor(RETENTION))
    tester.test(1, [user(1), tweet(10, at=NAIVE)])
    assert views(tester.test(1, [tweet(11, at=T), user(2, at=NAIVE)])) == [(10, 1, 2, "hi", "ann"), (11, 1, 2, "hi", "ann")]


def test_with_profile_updates_after_a_tweets_retention_the_processor_and_the_reference_agree(monkeypatch):
    """`make soak`'s slices (the same authors, a day of event time apart), with a 3-day retention:
    a tweet's last view carries the last profile within its retention, not the author's latest,
    in the processor (batch by batch, through TwsTester) and in the batch reference alike."""
    from generators import tweet_views as generator
    from jobs.tweet_views.in_memory import InMemory as TweetViews
    from perf.soak import ENTITY_IDS, WITHIN_THE_DELAY, _shifted
    from references import tweet_views as reference
    monkeypatch.setenv("LAB_TWEET_VIEWS_RETENTION", "3 days")
    pipeline, records, out, slices = TweetViews(), [], [], 8
    for piece in range(slices):
        records += (more := _shifted(generator.generate(1000 + piece, 200, disorder=WITHIN_THE_DELAY), piece, slices,
                                     ENTITY_IDS))
        out += pipeline.batch(pipeline.rows(more))
    want = reference.expected(records)
    assert pipeline.views(out) == want
    latest_users, _ = reference.latest(records)
    held_back = [v for v in want.values() if v["user_version"] < latest_users[v["user_id"]]["version"]]
    assert 0 < len(held_back) < len(want)  # the slices more than 3 days before the last profile update


# --- `joinlab compare tweet-views` (references/tweet_views_alternatives.py), without Spark -----------

def test_compare_tweet_views_prints_its_flags_and_refuses_bad_ones_before_spark_starts(capsys, monkeypatch):
    import pytest

    import joinlab.spark
    from joinlab.cli import main
    monkeypatch.setattr(joinlab.spark, "session", lambda *a, **k: pytest.fail("Spark started for bad flags"))
    with pytest.raises(SystemExit) as done:
        main(["compare", "tweet-views", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "usage: joinlab compare tweet-views" in out
    for flag in ("--range", "--watermark", "--batch-size", "--days", "--max-delay", "--tweets-first", "--no-job"):
        assert flag in out
    for argv, message in ((["--range", "31 days"], "longer than the retention (30 days"),
                          (["--watermark", "soon"], "--watermark='soon': give a whole number and a unit"),
                          (["--count", "5"], "need --count >= 10")):
        with pytest.raises(SystemExit):
            main(["compare", "tweet-views", *argv])
        assert message in capsys.readouterr().err, argv


def test_the_watermark_rules_count_a_side_without_events_as_0_and_drop_rows_at_or_behind_it():
    """Spark's rules as the comparison applies them (its Spark tests hold them against Spark): the
    watermark of a micro-batch is the older of the two sides' newest event times before it, minus
    the delay; none while one side has had no event; a row at it is late, as one behind it is."""
    from joinlab.generate import Record, iso
    from references.tweet_views_alternatives import arrivals

    def user_at(user_id, hours):
        return Record("users", b"1", ('{"user_id": %d, "name": "n", "handle": "h", "version": 1, "event_time": "%s"}'
                                      % (user_id, iso(T + timedelta(hours=hours)))).encode(), "event")

    def tweet_at(tweet_id, hours):
        return Record("tweets", b"1", ('{"tweet_id": %d, "user_id": 1, "text": "t", "version": 1, "event_time": "%s"}'
                                       % (tweet_id, iso(T + timedelta(hours=hours)))).encode(), "event")
    batches = [[tweet_at(1, 10)], [tweet_at(2, 0)], [user_at(1, 5)], [user_at(2, 4), tweet_at(3, 3), tweet_at(4, 4.5)]]
    found = arrivals(batches, watermark_ms=3_600_000)
    assert [a.watermark_us for a in found[:3]] == [None, None, None], "the users side has had no event yet"
    assert [a.late for a in found] == [False, False, False, True, True, False]  # watermark: 5 h - 1 h
