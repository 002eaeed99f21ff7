"""A transformWithState stage whose Python worker hangs in its first task, on a Spark server of this
process's own (joinlab.spark.session; $LAB_PYTHON_IDLE_TIMEOUT from the caller): the worker neither
reads nor writes, as one does that waits for a state server thread that died. Prints the stage's
output as JSON lines once the query has read its records. argv: a path that does not exist yet
(the first task creates it, then hangs; its retry finds it and goes on)."""
import json
import sys
import time
from collections import namedtuple
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor

from joinlab import microbatch
from joinlab.spark import session

HUNG = Path(sys.argv[1])
Record = namedtuple("Record", "topic key value")


class CountPerKey(StatefulProcessor):
    def init(self, handle):
        self.count = handle.getValueState("count", "n bigint")

    def handleInputRows(self, key, rows, timerValues):
        if not HUNG.exists():
            HUNG.touch()
            time.sleep(3600)
        total = sum(1 for _ in rows) + (self.count.get() or (0,))[0]
        self.count.update((total,))
        yield Row(key=key[0], n=total)

    def close(self):
        pass


def build(raw):
    return (raw.select(F.col("key").cast("string").alias("key"))
            .groupBy("key").transformWithState(CountPerKey(), "key string, n bigint", "Append", "None"))


records = [Record("t", f"k{i % 3}".encode(), b"{}") for i in range(9)]
for row in microbatch.run(session("stuck-worker"), build, [records]):
    print(json.dumps(row.asDict()), flush=True)
