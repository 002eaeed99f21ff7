"""Exactly-once replay of the source: a query killed with SIGKILL mid-batch and restarted from its
checkpoint delivers every (partition, offset) exactly once to a transactional (file) sink."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from joinlab.topics import create_topics, producer
from tests.conftest import wait_for

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


def produce(bootstrap, start, stop):
    p = producer(bootstrap)
    for i in range(start, stop):
        p.send("records", value=str(i).encode(), partition=i % 3)
    p.flush()


def launch(bootstrap, checkpoint, output, mode, log):
    return subprocess.Popen([sys.executable, "-m", "tests.programs.source_to_files", bootstrap, "records",
                             str(checkpoint), str(output), mode], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def batch_in_flight(checkpoint: Path):
    """The id of a batch that is planned (offsets written) but not committed yet, if any."""
    planned = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}
    committed = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")}
    in_flight = [b for b in planned - committed if b >= 2]
    return in_flight[0] if in_flight else None


def test_sigkill_mid_batch_then_restart_delivers_every_offset_exactly_once(spark, bootstrap, tmp_path):
    create_topics(bootstrap, ["records"], partitions=3)
    produce(bootstrap, 0, 3000)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    with open(tmp_path / "run1.log", "wb") as log:
        first = launch(bootstrap, checkpoint, output, "live", log)
        try:
            killed_in = wait_for(lambda: batch_in_flight(checkpoint), 180, "a batch in flight after two commits",
                                 interval_s=0.02)
            os.killpg(first.pid, signal.SIGKILL)
        finally:
            first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert not (checkpoint / "commits" / str(killed_in)).exists(), "the batch finished before the kill"

    produce(bootstrap, 3000, 4000)
    with open(tmp_path / "run2.log", "wb") as log:
        second = launch(bootstrap, checkpoint, output, "catch-up", log)
        assert second.wait(timeout=300) == 0, (tmp_path / "run2.log").read_text()[-3000:]

    rows = spark.read.schema("partition int, offset long, value string").json(str(output)).collect()
    delivered = [(r.partition, r.offset) for r in rows]
    assert len(delivered) == 4000, f"{len(delivered) - len(set(delivered))} duplicates, or records missing"
    assert set(delivered) == {(i % 3, i // 3) for i in range(4000)}
    assert sorted(int(r.value) for r in rows) == list(range(4000))
