"""The SparkSession every pattern uses, with Spark's own Kafka connector (`format("kafka")`,
not in the PySpark wheel: `connector_conf`, docs/kafka.md)."""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from joinlab import class_archive, jars, logs
from joinlab.config import lab_home, malloc_arenas, shuffle_partitions
from joinlab.stack.services import running_master_url

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# RocksDB writes a small changelog per commit instead of uploading a snapshot of its files: a
# shorter commit per micro-batch (docs/benchmarks.md). Not fixed by a checkpoint. Row counting
# (Spark's default) stays on: the status line, the notebooks and `make soak` show state rows.
STATE_STORE_CONF = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
# RocksDB's memtables and block caches share one bound per JVM instead of taking up to their own
# for every partition of every stage (docs/operations.md#memory).
ROCKSDB_MEMORY_CONF = {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
                       "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "128"}
# Checkpoint files written through Hadoop's FileSystem API, not FileContext (Spark's default):
# the same files, in less time per commit (docs/benchmarks.md); not fixed by a checkpoint. It
# checks that a file is absent, then renames, so two runs on one checkpoint are still refused at
# their first clash, except within the instant between the check and the rename.
CHECKPOINT_FILES = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILES_CONF = {CHECKPOINT_FILES: "org.apache.spark.sql.execution.streaming.checkpointing."
                                           "FileSystemBasedCheckpointFileManager"}
# HotSpot never compiles a method of more than 8,000 bytes of bytecode: it stays interpreted. The
# code Spark generates for parsing (joinlab.events) is such a method, so without this every record
# would be parsed by the interpreter (docs/benchmarks.md). And, for the lab's memory budget
# (docs/operations.md#memory): a heap that starts small, not at a 64th of the machine's memory,
# and the serial collector, whose heap grows only as far as the live data needs.
JVM_OPTIONS = "-XX:-DontCompileHugeMethods -Xms64m -XX:+UseSerialGC"
# On a cluster (the lab's stacks, whose memory budget counts every JVM), drivers and executors
# keep their heaps to 10-30% free after a full collection, not 40-70% (their old generations held
# 62-68 MiB of live data in 103-127 MiB). A local session, which runs the tasks in its driver,
# keeps the JVM's own ratios (docs/operations.md#memory).
CLUSTER_JVM_OPTIONS = "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
# A driver on a cluster plans each micro-batch and watches its tasks; the executors run them. Its
# JVM compiles with C1 only: no C2 compiler, whose working memory a driver kept (once up to
# 1 GiB of RSS for a heap of 512 MiB), no profiled code in its code cache (docs/operations.md#memory).
CLUSTER_DRIVER_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:MaxNewSize=32m"
# A UI store of the last 100 SQL executions, jobs and stages, not 1,000: a micro-batch is one of
# each, and a long-running driver's heap grew with them (docs/benchmarks.md).
UI_STORE_CONF = {"spark.sql.ui.retainedExecutions": "100", "spark.ui.retainedJobs": "100",
                 "spark.ui.retainedStages": "100"}


def memory_conf(master: str) -> dict[str, str]:
    """Heaps within the lab's memory budget (docs/operations.md#memory), unless Spark's own
    variables say otherwise: the least Spark accepts on a cluster, where a driver plans and watches;
    a local driver runs the tasks too. Executors get the lab's malloc arenas (joinlab.config.jvm_env)."""
    driver = "1g" if master.startswith("local") else "512m"
    return {"spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", driver),
            "spark.executor.memory": os.environ.get("SPARK_EXECUTOR_MEMORY", "512m"),
            "spark.executorEnv.MALLOC_ARENA_MAX": malloc_arenas(), **UI_STORE_CONF}


# Spark's classes from one archive (joinlab.class_archive) on a cluster only, where it is shared by
# the stack's six JVMs and keeps the lab within its memory budget. A local session has no one to
# share it with, and whether it slows `make bench`'s long local session is not settled yet
# (docs/benchmarks.md, perf.archive_local).
def driver_java_options(master: str) -> str:
    """The driver JVM's options: the lab's, and on a cluster its heap ratios, C1 only and Spark's
    classes from the archive the stack's JVMs share."""
    return jvm_options(*([] if master.startswith("local") else
                         [CLUSTER_JVM_OPTIONS, CLUSTER_DRIVER_OPTIONS, class_archive.java_options()]))


def executor_java_options() -> str:
    """An executor's (on a cluster only): the lab's, its heap ratios, the stack's shared class archive."""
    return jvm_options(CLUSTER_JVM_OPTIONS, class_archive.java_options())


def jvm_options(*more: str) -> str:
    """The options of every JVM of a session (its logging, JVM_OPTIONS), then `more`."""
    return " ".join(filter(None, [logs.java_options(lab_home()), JVM_OPTIONS, *more]))


def spark_master() -> str:
    """$SPARK_MASTER; else the native stack's standalone master while it runs (`make up-native`,
    found through its state file under lab_home()); else a local master with every core."""
    return os.environ.get("SPARK_MASTER") or running_master_url() or "local[*]"


def session(app_name: str = "stream-join-lab", **conf: str) -> SparkSession:
    """A session with the RocksDB state store (transformWithState needs it), the lab's log settings
    and the Kafka connector; `conf` goes last. Python workers run the driver's interpreter, so they
    import the same packages (a worker on another Python is the most common PySpark lab failure)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    driver_host = os.environ.get("LAB_DRIVER_HOST", "127.0.0.1")  # a container name in Compose
    bind = "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0"
    os.environ.setdefault("SPARK_LOCAL_IP", bind)
    master = spark_master()
    if not master.startswith("local"):
        # The driver JVM on a cluster (started below by spark-submit, from this environment): the
        # lab's malloc arenas. A local one keeps glibc's own, as its heap ratios stay the JVM's.
        os.environ.setdefault("MALLOC_ARENA_MAX", malloc_arenas())
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions()))
               .config(map={**STATE_STORE_CONF, **CHECKPOINT_FILES_CONF, **ROCKSDB_MEMORY_CONF,
                            **memory_conf(master)})
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", str(ui_enabled()).lower())
               .config("spark.driver.bindAddress", bind)
               .config("spark.driver.host", driver_host)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.chunkBase64String.enabled", "false")
               .config("spark.python.daemon.module", "joinlab.pyworkers")
               .config("spark.driver.extraJavaOptions", driver_java_options(master))
               .config("spark.executor.extraJavaOptions", executor_java_options())  # on a cluster only
               .config(map={**connector_conf(), **conf}))
    starts_jvm = SparkContext._active_spark_context is None
    with logs.filter_stderr() if starts_jvm else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(logs.level())
    return spark


def stop(spark: SparkSession) -> None:
    """Stop the session, after the state stores and Kafka producers its JVM keeps: where the JVM
    lives on (a notebook kernel, `joinlab demo all`), their maintenance task and lost connections
    would log warnings later (docs/operations.md). They go first: a maintenance run that fires while
    the session stops would find no SparkEnv either."""
    state_stores(spark).stop()
    kafka_producers(spark).reset()
    spark.stop()


def state_stores(spark: SparkSession):
    """The JVM's StateStore object (Scala's singleton): the state stores this JVM has loaded."""
    return spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.execution.streaming.state.StateStore$").getField("MODULE$").get(None)


def kafka_producers(spark: SparkSession):
    """The Kafka connector's pool of cached producers in this JVM (Scala's singleton)."""
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return loader.loadClass("org.apache.spark.sql.kafka010.producer.InternalKafkaProducerPool$") \
        .getField("MODULE$").get(None)


def executors(spark: SparkSession) -> int | None:
    """The application's executors now, the driver not counted; None in local mode (the driver runs
    the tasks there, so there is no executor to lose)."""
    context = spark.sparkContext
    if context.master.startswith("local"):
        return None
    return context._jsc.sc().getExecutorMemoryStatus().size() - 1


def ui_enabled() -> bool:
    """Whether the driver runs its web UI: $LAB_SPARK_UI, on unless false (tests/conftest sets it)."""
    return os.environ.get("LAB_SPARK_UI", "true").strip().lower() not in ("false", "0", "no", "off")


def connector_conf() -> dict[str, str]:
    """The session settings that put Spark's Kafka connector on its classpath (none where it is
    already in PySpark's jars folder); JarsError naming `make install` when it is nowhere."""
    import pyspark
    if any(Path(pyspark.__file__).parent.joinpath("jars").glob("spark-sql-kafka-0-10_*.jar")):
        return {}
    if os.environ.get("LAB_SPARK_PACKAGES", "").strip().lower() in ("1", "true", "yes", "on"):
        return {"spark.jars.packages": jars.connector_coordinates()[0]}
    return {"spark.jars": ",".join(map(str, jars.jars(jars.connector_bundle())))}


# How long the broker may hold a fetch open: Kafka's default (500 ms) is paid by about every task
# that reads a topic, and a task only reads offsets that exist (docs/kafka.md).
FETCH_MAX_WAIT_MS = "50"


def read_kafka(spark: SparkSession, bootstrap: str, topics: list[str], starting: str = "earliest",
               max_offsets_per_trigger: int | None = None, fail_on_data_loss: bool = True) -> DataFrame:
    """A streaming DataFrame over `topics`. With `fail_on_data_loss` (the default) a query stops
    when its checkpointed offsets are gone from the broker (deleted, aged out, or a topic
    recreated); without it, it carries on from what exists."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", ",".join(topics))
              .option("startingOffsets", starting)
              .option("failOnDataLoss", str(fail_on_data_loss).lower())
              .option("kafka.fetch.max.wait.ms", FETCH_MAX_WAIT_MS))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


def read_kafka_batch(spark: SparkSession, bootstrap: str, topics: list[str]) -> DataFrame:
    """Everything currently in `topics`, as a batch DataFrame."""
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load())


def kafka_sink(df: DataFrame, bootstrap: str, checkpoint: str) -> DataStreamWriter:
    """A writeStream to Kafka; rows carry `topic`, `key`, `value`."""
    return (df.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("checkpointLocation", checkpoint))
