"""Tweet views end to end: generator -> Kafka -> Spark job -> Kafka -> verifier, real parts only."""
import json
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import jobs.tweet_views.parts as tv
from generators.tweet_views import generate
from joinlab.generate import Disorder, Record, iso, send
from joinlab.topics import create_topics, read_topics
from joinlab.verify import verify
from tests.conftest import assert_dead_lettered, run_job_to_end, stop_mid_stream_and_resume

pytestmark = pytest.mark.spark

DISORDERS = {
    "shuffled": dict(disorder=Disorder(delayed=0.5, max_delay_s=20, duplicates=0.1, malformed=0.02)),
    "tweets-first": dict(disorder=Disorder(duplicates=0.05), tweets_first=True),
}


def run_to_end(spark, bootstrap, checkpoint, **kwargs):
    return run_job_to_end(spark, tv, bootstrap, checkpoint, **kwargs)


def setup_topics(bootstrap):
    create_topics(bootstrap, tv.INPUT_TOPICS + tv.OUTPUT_TOPICS)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("disorder", list(DISORDERS))
def test_final_views_equal_the_batch_reference(spark, bootstrap, tmp_path, seed, disorder):
    setup_topics(bootstrap)
    send(bootstrap, generate(seed, 1500, **DISORDERS[disorder]), progress=False)
    query = run_to_end(spark, bootstrap, tmp_path / "cp", max_offsets_per_trigger=400)
    assert len([p for p in query.recentProgress if p.numInputRows]) >= 3, "want several micro-batches"
    report = verify("tweet-views", bootstrap)
    assert report.expected > 800
    assert report.ok, "\n".join(report.lines())


def record(topic, key, value: bytes) -> Record:
    return Record(topic, str(key).encode(), value, "event")


def send_json(bootstrap, topic, key, body):
    send(bootstrap, [record(topic, key, json.dumps(body).encode())], progress=False)


def views_of(bootstrap) -> list[dict]:
    return [json.loads(r.value) for r in read_topics(bootstrap, [tv.VIEWS_TOPIC])]


def test_over_more_than_the_retention_with_the_topics_read_apart_the_views_equal_the_reference(
        spark, bootstrap, tmp_path, monkeypatch):
    """`make soak`'s slices (the same 20 authors, a day apart) over 8 days with a 3-day retention,
    80 records per batch: the tweets topic is read ahead of the users topic (it holds more), so an
    author's newest event runs ahead of profile updates still to come; each tweet must still end
    with the last profile within 3 days of it, as the reference says (with the retention measured
    from the newest event alone, 40 slices of the defaults gave 1,037 stale views)."""
    from perf.soak import ENTITY_IDS, WITHIN_THE_DELAY, _shifted
    from references import tweet_views as reference
    monkeypatch.setenv("LAB_TWEET_VIEWS_RETENTION", "3 days")  # read where the job is built, on the driver
    setup_topics(bootstrap)
    slices, records = 8, []
    for piece in range(slices):
        records += _shifted(generate(1000 + piece, 200, disorder=WITHIN_THE_DELAY), piece, slices, ENTITY_IDS)
    send(bootstrap, records, progress=False)
    run_to_end(spark, bootstrap, tmp_path / "cp", max_offsets_per_trigger=80)
    report = verify("tweet-views", bootstrap)
    assert report.ok, "\n".join(report.lines())
    latest, _ = reference.latest(records)
    assert any(v["user_version"] < latest[v["user_id"]]["version"] for v in reference.expected(records).values())


def test_a_user_update_after_n_tweets_re_emits_n_views_with_the_new_version(spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    at = "2026-01-01T00:00:00.000Z"
    send_json(bootstrap, "users", 7, {"user_id": 7, "name": "Ann", "handle": "@ann", "version": 1, "event_time": at})
    for t in range(12):
        send_json(bootstrap, "tweets", t, {"tweet_id": t, "user_id": 7, "text": f"t{t}", "version": 1, "event_time": at})
    run_to_end(spark, bootstrap, tmp_path / "cp")
    assert len(views_of(bootstrap)) == 12
    send_json(bootstrap, "users", 7, {"user_id": 7, "name": "Anne", "handle": "@anne", "version": 2, "event_time": at})
    run_to_end(spark, bootstrap, tmp_path / "cp")
    updated = [v for v in views_of(bootstrap) if v["author"]["version"] == 2]
    assert sorted(v["tweet_id"] for v in updated) == list(range(12))
    assert {v["author"]["name"] for v in updated} == {"Anne"}


def test_restart_from_the_checkpoint_mid_stream_still_equals_the_reference(spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    send(bootstrap, generate(11, 3000, **DISORDERS["shuffled"]), progress=False)
    stop_mid_stream_and_resume(spark, tv, bootstrap, str(tmp_path / "cp"), max_offsets_per_trigger=300)
    report = verify("tweet-views", bootstrap)
    assert report.ok, "\n".join(report.lines())


BAD = {
    "empty value": b"",
    "malformed JSON": b'{"user_id": 1, "name": ',
    "not a JSON object": b"[1, 2, 3]",
    "missing field: handle": json.dumps({"user_id": 1, "name": "x", "version": 1,
                                         "event_time": "2026-01-01T00:00:00Z"}).encode(),
    "invalid field: version (expected bigint)": json.dumps({"user_id": 1, "name": "x", "handle": "@x",
                                                            "version": "seven", "event_time": "2026-01-01T00:00:00Z"}).encode(),
    "invalid field: event_time (expected timestamp)": json.dumps({"user_id": 1, "name": "x", "handle": "@x",
                                                                  "version": 1, "event_time": "soon"}).encode(),
    "invalid field: version (must be >= 1)": json.dumps({"user_id": 1, "name": "x", "handle": "@x",
                                                         "version": 0, "event_time": "2026-01-01T00:00:00Z"}).encode(),
}


def test_each_kind_of_bad_record_is_dead_lettered_with_its_reason_and_valid_records_are_unaffected(
        spark, bootstrap, tmp_path):
    setup_topics(bootstrap)
    good = generate(5, 600)
    bad = [record("users", f"bad-{i}", value) for i, value in enumerate(BAD.values())]
    send(bootstrap, good[:300] + bad + good[300:], progress=False)
    run_to_end(spark, bootstrap, tmp_path / "cp", max_offsets_per_trigger=200)
    assert_dead_lettered(bootstrap, "tweet-views", tv.DEAD_LETTERS_TOPIC, tv.USERS_TOPIC, BAD)
    report = verify("tweet-views", bootstrap)
    assert report.ok and report.expected > 300, "\n".join(report.lines())


def test_a_checkpoint_of_the_previous_settings_resumes_and_one_of_the_previous_state_layout_is_refused(
        spark, bootstrap, tmp_path):
    """A checkpoint started with the settings before the speed changes (four shuffle partitions,
    no changelog checkpointing, files written through FileContext) resumes under the current ones and keeps its four partitions. One
    whose state has the per-event layout ("user" + "tweets", which Spark would restart without a
    word while the processor reads "author") is refused, with the command that starts again."""
    from joinlab import runner
    from joinlab.kit import solutions
    from joinlab.spark import CHECKPOINT_FILES, STATE_STORE_CONF
    per_event = solutions.from_file(Path(__file__).parent / "tweet_views_per_event.py")
    setup_topics(bootstrap)
    records = generate(12, 2000, **DISORDERS["tweets-first"])
    send(bootstrap, records[:1200], progress=False)
    spark_default_files = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    old = {"spark.sql.shuffle.partitions": "4", **{key: "false" for key in STATE_STORE_CONF},
           CHECKPOINT_FILES: spark_default_files}
    with runner.session_conf(spark, old):
        for checkpoint, solution in ((tmp_path / "cp", None), (tmp_path / "per-event", per_event)):
            query = runner.start(spark, tv, bootstrap, str(checkpoint), available_now=True, solution=solution,
                                 max_offsets_per_trigger=400)
            query.awaitTermination()
            assert query.exception() is None
    assert runner.state_variables(str(tmp_path / "per-event")) == {"user", "tweets"}
    assert runner.state_variables(str(tmp_path / "cp")) == {"author"}
    with pytest.raises(runner.CheckpointError, match=r"'tweets', 'user'.*--reset"):
        runner.start(spark, tv, bootstrap, str(tmp_path / "per-event"), available_now=True)
    send(bootstrap, records[1200:], progress=False)
    resumed = run_to_end(spark, bootstrap, tmp_path / "cp")
    assert resumed.recentProgress[0]["batchId"] >= 3, "the restart began again from batch 0"
    assert resumed.lastProgress["stateOperators"][0]["numShufflePartitions"] == 4
    report = verify("tweet-views", bootstrap)
    assert report.ok and report.expected > 500, "\n".join(report.lines())


# --- The design it replaces: Spark's own stream-stream join (references/tweet_views_alternatives.py) ---

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def user_at(user_id: int, version: int, days: float) -> Record:
    body = {"user_id": user_id, "name": f"user {user_id} v{version}", "handle": f"@u{user_id}", "version": version,
            "event_time": iso(T0 + timedelta(days=days))}
    return record(tv.USERS_TOPIC, user_id, json.dumps(body).encode())


def tweet_at(tweet_id: int, user_id: int, days: float, version: int = 1) -> Record:
    body = {"tweet_id": tweet_id, "user_id": user_id, "text": f"tweet {tweet_id}", "version": version,
            "event_time": iso(T0 + timedelta(days=days))}
    return record(tv.TWEETS_TOPIC, tweet_id, json.dumps(body).encode())


HOUR = 1 / 24
# Each kind of mismatch of Spark's join (range 1 day, watermarks 1 hour), one tweet each; the watermark
# of a micro-batch is the older of the two sides' newest event times before it, minus the hour.
KINDS = [
    [user_at(1, 1, 0), user_at(2, 1, 0), user_at(3, 1, 0), user_at(5, 1, HOUR),
     tweet_at(12, 2, HOUR),            # B: joins profile v1; v2 comes 3 days later
     tweet_at(15, 5, 2 * HOUR),        # E: right
     tweet_at(16, 6, HOUR)],           # F: before its author, who comes in the next batch: right
    # the watermark is day 0 (users' newest 1 h, tweets' 2 h, minus the hour)
    [user_at(6, 1, HOUR / 2), user_at(2, 2, 3),
     tweet_at(11, 1, 5),               # A: its author's only profile is 5 days older
     tweet_at(14, 4, 5 + 3 * HOUR)],   # D: its author's profile comes late
    # day 3 - 1 h
    [tweet_at(13, 3, 2 * HOUR),        # C: 3 days behind the watermark
     user_at(8, 1, 6)],
    # day 5 + 2 h (tweets' newest 5 d 3 h, minus the hour)
    [user_at(4, 1, 5 + HOUR)],         # D's author, an hour behind the watermark
]


def test_spark_s_own_join_misses_each_kind_the_events_show_and_the_job_misses_none(spark):
    """Spark's stream-stream join, as the guide writes it, on micro-batches built to show one
    mismatch of each kind: a profile older than the range, an update after it, a tweet and a
    profile behind the watermark. The rules that explain them also predict everything Spark emits;
    the tweet-views job on the same micro-batches ends with every view the reference has."""
    from references.tweet_views import expected
    from references.tweet_views_alternatives import (REASONS, Join, format_causes, predicted, run_job, run_join,
                                                     stamped_batches)
    batches = stamped_batches(KINDS)
    want = expected([r for batch in batches for r in batch])
    assert sorted(want) == [11, 12, 13, 14, 15, 16]
    join = Join("1 day", "1 hour")
    result = run_join(spark, batches, join)
    assert {m.tweet_id: (m.state, m.kind) for m in result.mismatches} == {
        11: ("missing", "profile before the range"), 12: ("stale", "update after the range"),
        13: ("missing", "tweet behind the watermark"), 14: ("missing", "profile behind the watermark")}
    assert result.views[12]["user_version"] == 1 and want[12]["user_version"] == 2
    assert result.views[15] == want[15] and result.views[16] == want[16], "either side first, within the range"
    assert result.views == predicted(batches, join)
    causes = format_causes(result)
    for kind in ("profile before the range", "update after the range", "tweet behind the watermark",
                 "profile behind the watermark"):
        assert REASONS[kind].format(range="1 day", watermark="1 hour", retention="30 days") in causes, kind
    assert "e.g. tweet 13: the tweet at 2026-01-01 02:00 arrived in micro-batch 2" in causes

    the_job = run_job(spark, batches, want)
    assert the_job.mismatches == [] and the_job.views == want


def test_on_a_generated_backfill_the_rules_predict_every_view_of_spark_s_join(spark):
    """Disorder far beyond the watermark (up to 3 days), duplicates, edits and profile updates, over
    60 days cut into six micro-batches: what Spark's join ends with is, tweet for tweet, what the two
    rules predict, so every mismatch has a cause; and every kind occurs."""
    from references.tweet_views_alternatives import Join, cut, predicted, run_join, stamped
    records = stamped(generate(3, 1200, disorder=Disorder(delayed=0.2, max_delay_s=3 * 86400, duplicates=0.05),
                               rate=1200 / (60 * 86400)))
    join = Join("2 days", "1 hour")
    batches = cut(records, 220)
    result = run_join(spark, batches, join)
    assert result.views == predicted(batches, join)
    kinds = Counter(m.kind for m in result.mismatches)
    assert "unexplained" not in kinds
    assert kinds["profile before the range"] > 100 and kinds["update after the range"] > 10, kinds
    assert kinds["tweet behind the watermark"] and kinds["profile behind the watermark"], kinds


def test_joinlab_compare_tweet_views_prints_the_table_and_the_causes(spark, capsys):
    from joinlab.cli import main
    assert main(["compare", "tweet-views", "--count", "400", "--batch-size", "200", "--range", "1 day",
                 "--no-job"]) == 0
    out = capsys.readouterr().out
    assert "Spark's join, range ±1 day" in out and "profile before the range" in out and "why: " in out
    assert "tweet-views job" not in out
