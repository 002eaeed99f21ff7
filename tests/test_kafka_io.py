"""The lab's Kafka reads and writes (`joinlab.spark`: Spark's own connector) against Apache Kafka and real Spark."""
import contextlib
import json

import pytest
from pyspark.sql import functions as F

from joinlab.patterns import PATTERNS
from joinlab.kit.kafka import Kafka, read
from joinlab.status import as_dict
from joinlab.topics import create_topics, producer, read_topics

pytestmark = pytest.mark.spark


def produce(bootstrap, topic, n, partitions=3, headers=False):
    create_topics(bootstrap, [topic], partitions=partitions)
    p = producer(bootstrap)
    for i in range(n):
        p.send(topic, key=str(i).encode(), value=json.dumps({"i": i}).encode(), partition=i % partitions,
               headers=[("h", str(i).encode())] if headers else None)
    p.flush()


def test_batch_read_has_the_official_columns_and_every_record(spark, bootstrap):
    produce(bootstrap, "in", 2500)
    df = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "in").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    rows = df.select("partition", "offset", F.col("value").cast("string").alias("v")).collect()
    assert len(rows) == 2500
    assert {(r.partition, r.offset) for r in rows} == {(i % 3, i // 3) for i in range(2500)}


def test_headers_and_explicit_starting_offsets(spark, bootstrap):
    produce(bootstrap, "in", 30, partitions=1, headers=True)
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "in").option("includeHeaders", "true")
          .option("startingOffsets", '{"in": {"0": 25}}').load())
    rows = df.orderBy("offset").collect()
    assert [r.offset for r in rows] == [25, 26, 27, 28, 29]
    assert [(h.key, bytes(h.value)) for h in rows[0].headers] == [("h", b"25")]


def test_stream_rate_limit_makes_several_batches_and_the_sink_writes_them_all(spark, bootstrap, tmp_path):
    produce(bootstrap, "in", 1200)
    create_topics(bootstrap, ["out"])
    stream = read(spark, Kafka(bootstrap, max_offsets_per_trigger=250), ["in"])
    query = (stream.select(F.lit("out").alias("topic"), "key", "value").writeStream
             .format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p.numInputRows > 0]
    assert len(batches) >= 5 and all(p.numInputRows <= 250 + 3 for p in batches)
    out = read_topics(bootstrap, ["out"])
    assert sorted(json.loads(r.value)["i"] for r in out) == list(range(1200))


def test_sink_topic_option_and_a_clear_error_without_any_topic(spark, bootstrap):
    create_topics(bootstrap, ["dest"])
    df = spark.createDataFrame([("k1", "v1"), ("k2", "v2")], "key string, value string")
    (df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", "dest").mode("append").save())
    assert sorted(r.value for r in read_topics(bootstrap, ["dest"])) == [b"v1", b"v2"]
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).mode("append").save()


def _copy_in_to_out(spark, bootstrap, checkpoint, fail_on_data_loss=True):
    create_topics(bootstrap, ["out"])
    query = (read(spark, Kafka(bootstrap, fail_on_data_loss=fail_on_data_loss), ["in"])
             .select(F.lit("out").alias("topic"), "key", "value").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    with contextlib.suppress(Exception):  # the caller asserts on query.exception()
        query.awaitTermination()
    return query


def test_a_recreated_topic_fails_loudly_in_one_line_or_carries_on_from_what_exists(spark, bootstrap, tmp_path):
    """After `in` is deleted and created again with fewer records, the checkpoint's offsets point
    past its log. The query must stop and `joinlab.runner.failure` says so in one line naming the
    partition, the offsets and --reset (failOnDataLoss=true), or, with failOnDataLoss=false, it
    reads on from what exists."""
    from kafka import KafkaAdminClient
    from joinlab.runner import failure
    from tests.conftest import wait_for
    checkpoint = tmp_path / "cp"
    produce(bootstrap, "in", 30)
    assert _copy_in_to_out(spark, bootstrap, checkpoint).exception() is None
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.delete_topics(["in"])
    wait_for(lambda: "in" not in admin.list_topics(), 60, "'in' to be deleted")
    admin.close()
    produce(bootstrap, "in", 6)
    before = len(read_topics(bootstrap, ["out"]))
    query = _copy_in_to_out(spark, bootstrap, checkpoint)
    text = failure(query.exception())
    assert text.startswith("DataLossError: records the checkpoint counts on are gone from Kafka (Partition in-")
    assert "offset was changed from 10 to 2" in text and "--reset" in text and "\n" not in text
    assert len(read_topics(bootstrap, ["out"])) == before

    assert _copy_in_to_out(spark, bootstrap, checkpoint, fail_on_data_loss=False).exception() is None
    assert len(read_topics(bootstrap, ["out"])) == before  # nothing past the checkpoint's offsets yet


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_each_pattern_reads_each_kafka_record_once_per_micro_batch(spark, bootstrap, tmp_path, pattern):
    """Valid events and dead letters are two branches of a job's plan; both read one shuffle
    (joinlab.kit.events.parse_events), so Spark's count of rows read from the source is the number of
    records the batch took from Kafka, not twice it."""
    from joinlab import runner
    from joinlab import patterns
    from joinlab.status import offset_spans
    from tests.conftest import run_job_to_end
    patterns.generator(pattern).main(["--count", "300", "--seed", "7", "--malformed", "0.05",
                                      "--bootstrap", bootstrap, "--no-progress"])
    job = patterns.job(pattern)
    with runner.services(job, bootstrap):
        query = run_job_to_end(spark, job, bootstrap, tmp_path / "checkpoint", max_offsets_per_trigger=150,
                               counted=True)
    batches = [p for p in map(as_dict, query.recentProgress) if p["numInputRows"]]
    assert len(batches) >= 2
    for p in batches:
        taken = sum(sum(offset_spans(source).values()) for source in p["sources"])
        assert p["numInputRows"] == taken, p["sources"]
    letters = read_topics(bootstrap, [job.DEAD_LETTERS_TOPIC])
    assert letters, "the dead-letter branch ran"


def test_a_job_on_topics_of_its_own_sees_each_record_under_its_topics_name_and_equals_the_reference(
        spark, bootstrap, tmp_path):
    """`make up`'s warm-up runs each job on topics of its own (joinlab.runner.start's input_prefix and
    output_prefix): the job reads them as the pattern's topics, so its output there equals the
    pattern's reference, dead letters included, and nothing goes to the pattern's own topics."""
    from dataclasses import replace

    from joinlab import patterns
    from joinlab.generate import send
    from joinlab.verify import check
    from tests.conftest import run_job_to_end
    pattern, prefix = "tweet-views", "apart."  # two input topics: the job tells them apart by name
    job = patterns.job(pattern)
    create_topics(bootstrap, [prefix + topic for topic in patterns.all_topics(pattern)])
    records = patterns.generator(pattern).generate(5, 400)
    send(bootstrap, [replace(r, topic=prefix + r.topic) for r in records], progress=False)
    run_job_to_end(spark, job, bootstrap, tmp_path / "checkpoint", max_offsets_per_trigger=100,
                   input_prefix=prefix, output_prefix=prefix)

    def as_the_patterns(topics):
        return [replace(r, topic=r.topic.removeprefix(prefix))
                for r in read_topics(bootstrap, [prefix + topic for topic in topics])]
    outputs = as_the_patterns(job.OUTPUT_TOPICS)
    report = check(pattern, as_the_patterns(job.INPUT_TOPICS), outputs)
    assert report.ok, report
    assert {r.topic for r in outputs} >= set(job.OUTPUT_TOPICS) - {job.DEAD_LETTERS_TOPIC}
    assert not any("unexpected topic" in (r.value or b"").decode() for r in outputs)


def test_a_topic_created_again_with_fewer_partitions_gets_its_records_at_once(spark, bootstrap):
    """Spark's sink keeps one Kafka producer per set of options and every later write reuses it. A
    producer that wrote `out` with 5 partitions sends key "1" (murmur2: partition 4) to a partition
    that is gone once `out` is created again with 3, and the record waits there until its delivery
    timeout. Between tests, deleting the topics (`bootstrap`, delete_all_topics) closes those producers."""
    from tests.conftest import delete_all_topics

    def write_key_1():
        (spark.createDataFrame([("1", "v")], "key string, value string").write.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", "out")
         .option("kafka.request.timeout.ms", "4000").option("kafka.delivery.timeout.ms", "5000").save())

    create_topics(bootstrap, ["out"], partitions=5)
    write_key_1()
    delete_all_topics(bootstrap)  # and the producers that wrote them
    create_topics(bootstrap, ["out"], partitions=3)
    failed = _failed_tasks()
    write_key_1()
    assert [(r.partition, r.key) for r in read_topics(bootstrap, ["out"])] == [(0, b"1")]
    assert _failed_tasks() == failed, "the write's task failed: its record expired, and a retry wrote it"


def _failed_tasks() -> int:
    """Tasks of the server's jobs so far that failed (a retry may have written their rows again)."""
    from joinlab import spark as server
    tracker = server._embedded_server.sparkContext.statusTracker()
    stages = [stage for job in tracker.getJobIdsForGroup() for stage in tracker.getJobInfo(job).stageIds]
    return sum(tracker.getStageInfo(stage).numFailedTasks for stage in stages if tracker.getStageInfo(stage))
