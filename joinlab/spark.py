"""The SparkSession every pattern uses, with Spark's own Kafka connector (`format("kafka")`).

The connector is not in the PySpark wheel: a session takes it from the jar cache that
`make install` fills (joinlab.jars, passed as spark.jars), from PySpark's own jars folder where an
image put it there (the Docker image), or, with $LAB_SPARK_PACKAGES=1 on a machine without Maven,
from Spark's own resolver (spark.jars.packages).
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from joinlab import jars, logs
from joinlab.config import lab_home, shuffle_partitions
from joinlab.stack.services import running_master_url

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# State store settings that cut a micro-batch's commit: RocksDB writes a small changelog per
# commit instead of uploading a snapshot of its files. Not fixed by a checkpoint: an old checkpoint
# resumes with it as is. Row counting (trackTotalNumberOfRows, Spark's default) stays on: the
# status line, the notebooks and `make soak` show state rows. Numbers: docs/benchmarks.md.
STATE_STORE_CONF = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
# Checkpoint files (offsets, commits, state changelogs) written through Hadoop's FileSystem API
# rather than its FileContext API (Spark's default): the same temp file renamed into place, for
# less time per offset, commit and state store file on a local disk (docs/benchmarks.md). Not
# fixed by a checkpoint: both write the same files. The one difference: FileContext renames
# atomically without overwriting, the FileSystem API checks that the file is absent and then
# renames, so two runs started on one checkpoint are still refused at their first clash, except
# within the instant between the check and the rename.
CHECKPOINT_FILES = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILES_CONF = {CHECKPOINT_FILES: "org.apache.spark.sql.execution.streaming.checkpointing."
                                           "FileSystemBasedCheckpointFileManager"}


def spark_master() -> str:
    """$SPARK_MASTER; else the native stack's standalone master while it runs (`make up-native`,
    found through its state file under lab_home()); else a local master with every core."""
    configured = os.environ.get("SPARK_MASTER")
    if configured:
        return configured
    return running_master_url() or "local[*]"


def session(app_name: str = "stream-join-lab", **conf: str) -> SparkSession:
    """A session with the RocksDB state store (transformWithState needs it) and small defaults.
    Shuffle partitions (joinlab.config.shuffle_partitions) are fixed by a query's checkpoint:
    Spark restores a checkpoint's own number on restart, whatever the session says.

    Python workers run the driver's interpreter, so they import the same installed packages
    (a worker on another Python is the most common failure of PySpark labs)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    driver_host = os.environ.get("LAB_DRIVER_HOST", "127.0.0.1")  # a container name in Compose
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0")
    builder = (SparkSession.builder.appName(app_name).master(spark_master())
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions()))
               .config(map=STATE_STORE_CONF)
               .config(map=CHECKPOINT_FILES_CONF)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", str(ui_enabled()).lower())
               .config("spark.driver.bindAddress", "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0")
               .config("spark.driver.host", driver_host)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.chunkBase64String.enabled", "false"))
    # The JVMs start with the lab's log settings; options a caller gives for them come after.
    log_options = logs.java_options(lab_home())
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        builder = builder.config(key, " ".join(filter(None, [log_options, conf.pop(key, "")])))
    for key, value in {**connector_conf(), **conf}.items():
        builder = builder.config(key, value)
    starts_jvm = SparkContext._active_spark_context is None
    with logs.filter_stderr() if starts_jvm else contextlib.nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(logs.level())
    return spark


def stop(spark: SparkSession) -> None:
    """Stop the session and the state stores its JVM loaded. Spark leaves the JVM's StateStore
    maintenance task scheduled after the session stops, and where the JVM lives on (a notebook
    kernel, `joinlab demo all`) its next run finds no SparkEnv and logs a warning with a stack.
    StateStore.stop() unloads the stores and cancels the task; a session that never ran a stateful
    query has none, and the call does nothing. It goes before the session's stop: a maintenance run
    that fires while the session stops finds no SparkEnv either. Likewise the Kafka connector keeps
    its producers open in the JVM after the session stops, and each one logs its lost connection
    when the broker stops: they are closed first."""
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
    """Spark's web UI (the Structured Streaming tab: rates, durations, state rows, watermark) is on
    in the lab and off where nobody looks at it: $LAB_SPARK_UI=false (tests/conftest sets it)."""
    return os.environ.get("LAB_SPARK_UI", "true").strip().lower() not in ("false", "0", "no", "off")


def ui_url(spark: SparkSession) -> str | None:
    """The driver's web UI, None when it is off. It listens on SPARK_LOCAL_IP (127.0.0.1 in the lab)."""
    return spark.sparkContext.uiWebUrl


def connector_conf() -> dict[str, str]:
    """The session settings that put Spark's Kafka connector on its classpath (none where it is
    already in PySpark's jars folder); JarsError naming `make install` when it is nowhere."""
    import pyspark
    if any(Path(pyspark.__file__).parent.joinpath("jars").glob("spark-sql-kafka-0-10_*.jar")):
        return {}
    if os.environ.get("LAB_SPARK_PACKAGES", "").strip().lower() in ("1", "true", "yes", "on"):
        return {"spark.jars.packages": jars.connector_coordinates()[0]}
    return {"spark.jars": ",".join(map(str, jars.jars(jars.connector_bundle())))}


# How long the broker may hold a fetch open waiting for more data. The connector's consumer ends a
# task on a fetch the broker holds for its full wait, so Kafka's default (500 ms) is paid by about
# every task that reads a topic. A task only reads offsets that exist, so a shorter wait adds no
# polling of an idle topic. Measured in docs/benchmarks.md.
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
