"""Pure-logic tests of TweetViewsProcessor with pyspark's in-memory TwsTester: no Spark session,
no broker - the analogue of Flink's operator harness tests."""
from datetime import datetime, timezone

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from jobs.tweet_views_solution import TweetViewsProcessor

T = datetime(2026, 1, 1, tzinfo=timezone.utc)


def user(version, name="ann", user_id=1):
    return Row(kind="user", user_id=user_id, version=version, event_time=T, tweet_id=None, text=None,
               name=name, handle=f"@{name}")


def tweet(tweet_id, version=1, text="hi", user_id=1):
    return Row(kind="tweet", user_id=user_id, version=version, event_time=T, tweet_id=tweet_id, text=text,
               name=None, handle=None)


def views(out):
    return sorted((r.tweet_id, r.tweet_version, r.user_version, r.text, r.name) for r in out)


def test_a_tweet_before_its_author_waits_then_is_emitted_when_the_author_arrives():
    tester = TwsTester(TweetViewsProcessor())
    assert tester.test(1, [tweet(10)]) == []
    assert views(tester.test(1, [user(1)])) == [(10, 1, 1, "hi", "ann")]


def test_a_new_user_version_re_emits_every_stored_tweet():
    tester = TwsTester(TweetViewsProcessor())
    tester.test(1, [user(1)] + [tweet(t) for t in range(5)])
    out = tester.test(1, [user(2, name="anne")])
    assert views(out) == [(t, 1, 2, "hi", "anne") for t in range(5)]


def test_stale_and_duplicate_versions_are_ignored():
    tester = TwsTester(TweetViewsProcessor())
    tester.test(1, [user(3, name="new"), tweet(10, version=2, text="edited")])
    assert tester.test(1, [user(2, name="old"), user(3, name="new")]) == []
    assert tester.test(1, [tweet(10, version=1, text="first"), tweet(10, version=2, text="edited")]) == []
    assert tester.peekValueState("user", 1)[:2] == (3, "new")


def test_a_tweet_edit_replaces_the_stored_tweet_and_emits_only_that_tweet():
    tester = TwsTester(TweetViewsProcessor())
    tester.test(1, [user(1), tweet(10), tweet(11)])
    assert views(tester.test(1, [tweet(10, version=2, text="edited")])) == [(10, 2, 1, "edited", "ann")]
    assert tester.peekMapState("tweets", 1)[(10,)][:2] == (2, "edited")


def test_the_last_view_does_not_depend_on_the_order_within_a_batch():
    events = [tweet(10), user(2, name="b"), tweet(10, version=3, text="v3"), user(1, name="a"), tweet(10, version=2)]
    for ordering in (events, list(reversed(events))):
        out = TwsTester(TweetViewsProcessor()).test(1, ordering)
        assert views(out) == [(10, 3, 2, "v3", "b")]
