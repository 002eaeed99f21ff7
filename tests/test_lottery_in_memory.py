"""The same pipeline on in-memory rows: `jobs.lottery.job.build` (parsing, `decide`'s three stages, the
Kafka rows out) runs in a real streaming query over a list of records, with no broker. The source
(tests/spark_rows.py) serves the records in micro-batches with the Kafka source's columns, and
a memory sink collects what the job would write to its topics."""
from types import SimpleNamespace

import pytest

import jobs.lottery.parts as lottery
from generators.lottery import generate
from jobs.lottery.rules import ALREADY_STARTED, INACTIVE, NO_COUPON, NON_POSITIVE
from joinlab.generate import Disorder
from tests.spark_rows import read_records
from references import lottery as reference

pytestmark = pytest.mark.spark

WITHIN_THE_DELAY = Disorder(delayed=0.5, max_delay_s=4.0, duplicates=0.1, malformed=0.02)


def test_the_job_on_in_memory_rows_in_micro_batches_gives_the_reference_outcomes(spark, tmp_path):
    records = generate(4, 800, lotteries=3, users=30, disorder=WITHIN_THE_DELAY)
    raw = read_records(spark, records, batches=3, partitions=2)
    query = (lottery.build(raw).writeStream.format("memory").queryName("lottery_in_memory")
             .option("checkpointLocation", str(tmp_path / "cp")).outputMode("append")
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
        assert query.exception() is None
        rows = spark.table("lottery_in_memory").collect()
    finally:
        query.stop()
        spark.catalog.dropTempView("lottery_in_memory")

    data_batches = [p for p in query.recentProgress if p.numInputRows]
    assert len(data_batches) == 3, "one micro-batch per chunk"
    out = [SimpleNamespace(topic=r.topic, value=r.value.encode() if isinstance(r.value, str) else r.value)
           for r in rows]
    got = reference.actual(out)
    assert got == reference.expected(records)  # the generated list: arrival order is list order
    assert sum(key.startswith("winner") for key in got) >= 6
    assert {v["rule"] for key, v in got.items() if key.startswith("rejection")} == {
        ALREADY_STARTED, NON_POSITIVE, INACTIVE, NO_COUPON}
    letters = [r for r in out if r.topic == lottery.DEAD_LETTERS_TOPIC]
    assert len(letters) == sum(r.kind not in ("event", "duplicate") for r in records)
