"""How long the lab's read path takes per offset range, for each broker fetch wait given.

    .venv/bin/python scripts/fetch_wait.py 50 5 1

Starts an embedded broker, writes 600 small records over two topics of three partitions, then
reads six ranges of 16 records per task (what a tiny micro-batch of two topics reads), with the
worker's pooled consumer, as Spark's read tasks do (joinlab.spark_kafka.fetch.read_task).
"""
from __future__ import annotations

import statistics
import sys
import time

from joinlab.broker import EmbeddedBroker
from joinlab.spark_kafka.fetch import read_task
from joinlab.spark_kafka.options import KafkaOptions
from joinlab.spark_kafka.planning import OffsetRange, ReadTask
from joinlab.topics import create_topics, producer

ROUNDS, PER_RANGE = 6, 16


def main(waits: list[int]) -> None:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, ["a", "b"], partitions=3)
        send = producer(bootstrap)
        for i in range(600):
            send.send("a" if i % 2 else "b", value=b'{"x": 1}', partition=i % 3)
        send.flush()
        for wait in waits:
            options = KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": "a,b",
                                          "kafka.fetch.max.wait.ms": str(wait)})
            tasks, ranges = [], []
            for r in range(ROUNDS):
                task = tuple(OffsetRange(t, p, r * PER_RANGE, (r + 1) * PER_RANGE) for t in "ab" for p in range(3))
                began = time.perf_counter()
                rows = sum(batch.num_rows for batch in read_task(options, ReadTask(task)))
                tasks.append((time.perf_counter() - began) * 1000)
                assert rows == len(task) * PER_RANGE, rows
                for one in task:
                    began = time.perf_counter()
                    sum(batch.num_rows for batch in read_task(options, ReadTask((one,))))
                    ranges.append((time.perf_counter() - began) * 1000)
            print(f"fetch.max.wait.ms {wait:>4}: a task of 6 ranges {statistics.median(tasks[1:]):7.1f} ms, "
                  f"one range {statistics.median(ranges):6.1f} ms (medians; the first task is connection set-up)")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [50, 5, 1])
