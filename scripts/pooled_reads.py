"""Pooled reads of fresh offset ranges while producers write, for minutes: what a running job does.

    .venv/bin/python scripts/pooled_reads.py 12        # minutes (default 12)

Starts an embedded broker, writes 10 records a second to each of 8 topics (3 partitions), and
every ~1 s reads what is new in every pair of topics with the lab's read path (read_task, the
pooled consumers, two at a time, as two Python workers would), then prints the slowest read of each
minute. A read that gets nothing for 30 s fails with the fetch's own TimeoutError, as a Spark task
would. Two things it showed (joinlab.spark_kafka.pool, README "Failure modes"):
- with librdkafka's default reconnect backoff, reads of a few hundred records took 8-9 s (the
  idle close between rounds counted as a failed connection, and the delay doubled each time);
- after ~10 minutes the embedded broker answered fetches at one offset of a partition with empty
  responses although the partition held more records: the read stalled until its timeout.
"""
from __future__ import annotations

import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from joinlab.broker import EmbeddedBroker
from joinlab.spark_kafka.fetch import read_task
from joinlab.spark_kafka.options import KafkaOptions
from joinlab.spark_kafka.planning import plan_tasks
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer, producer

TOPICS = [f"t{i}" for i in range(8)]


def _write(bootstrap: str, stop: threading.Event) -> None:
    send, i = producer(bootstrap), 0
    while not stop.is_set():
        for topic in TOPICS:
            send.send(topic, key=str(i % 50).encode(), value=b'{"x": %d}' % i)
        i += 1
        time.sleep(0.1)
    send.close(timeout=5)


def main(minutes: float) -> int:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, TOPICS, partitions=3)
        stop = threading.Event()
        threading.Thread(target=_write, args=(bootstrap, stop), daemon=True).start()
        offsets = plain_consumer(bootstrap)
        pairs = [tuple(TOPICS[i:i + 2]) for i in range(0, len(TOPICS), 2)]
        read = {pair: {} for pair in pairs}
        options = {pair: KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": ",".join(pair),
                                             "kafkaConsumer.pollTimeoutMs": "30000"}) for pair in pairs}
        workers = ThreadPoolExecutor(2)
        began = minute_began = time.monotonic()
        slowest = 0.0
        try:
            while time.monotonic() - began < minutes * 60:
                for pair in pairs:
                    ends: dict = {}
                    for tp, offset in end_offsets(offsets, partitions_of(offsets, pair)).items():
                        ends.setdefault(tp.topic, {})[str(tp.partition)] = offset
                    started = time.monotonic()
                    reads = [workers.submit(lambda task=task, pair=pair: sum(
                        batch.num_rows for batch in read_task(options[pair], task)))
                        for task in plan_tasks(read[pair], ends, 10_000)]
                    for done in reads:
                        done.result()
                    slowest = max(slowest, time.monotonic() - started)
                    read[pair] = ends
                if time.monotonic() - minute_began >= 60:
                    print(f"{(time.monotonic() - began) / 60:5.1f} min: slowest read {slowest:.2f} s", flush=True)
                    minute_began, slowest = time.monotonic(), 0.0
                time.sleep(random.uniform(0.5, 1.5))
        except TimeoutError as exc:
            print(f"{(time.monotonic() - began) / 60:5.1f} min: {exc}", flush=True)
            return 1
        finally:
            stop.set()
            offsets.close()
    print(f"{minutes:g} min without a stalled read")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 12.0))
