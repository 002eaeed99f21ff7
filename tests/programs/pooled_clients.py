"""The lab connector's pooled clients outliving their broker, for the stderr test.

usage: python -m tests.programs.pooled_clients BOOTSTRAP TOPIC IDLE_S

Writes and reads TOPIC through the pool (so a producer and a consumer stay pooled), prints
"pooled", waits for a line on stdin (the test stops the broker meanwhile), leaves the clients idle
for IDLE_S, then reads again (it must fail: the broker is gone) and prints how it failed.
"""
import sys
import time

import pyarrow as pa

from joinlab.spark_kafka.fetch import read_task
from joinlab.spark_kafka.options import KafkaOptions
from joinlab.spark_kafka.planning import OffsetRange, ReadTask
from joinlab.spark_kafka.sink import produce_batches

bootstrap, topic, idle_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
options = KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "topic": topic,
                              "kafkaConsumer.pollTimeoutMs": "1500"})
produce_batches(options, [pa.RecordBatch.from_pydict({"value": [b"a"], "partition": [0]})])
task = ReadTask((OffsetRange(topic, 0, 0, 1),))
assert sum(batch.num_rows for batch in read_task(options, task)) == 1
print("pooled", flush=True)
sys.stdin.readline()
time.sleep(idle_s)  # the window in which an idle pooled client of a gone broker must stay quiet
try:
    list(read_task(options, task))
except Exception as exc:  # noqa: BLE001 - the test reads how it failed
    print(f"read failed: {type(exc).__name__}", flush=True)
