"""Tweet views end to end: generator -> Kafka -> Spark job -> Kafka -> verifier, real parts only."""
import json
from pathlib import Path

import pytest

import jobs.tweet_views.job as tv
from generators.tweet_views import generate
from joinlab.generate import Disorder, Record, send
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
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 3, "want several micro-batches"
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
    from joinlab import job as runner, solutions
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
