"""The SparkSession every pattern uses, and the one place that decides which Kafka connector runs.

Jobs call `read_kafka` / `kafka_sink` and never ask which connector is behind them: Spark's
official one when its classes are on the classpath (the Docker image), else ours (`labkafka`).
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from joinlab.config import shuffle_partitions, spark_master

OFFICIAL = "kafka"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def session(app_name: str = "stream-join-lab", **conf: str) -> SparkSession:
    """A session with the RocksDB state store (transformWithState needs it) and small defaults.

    Python workers run the driver's interpreter, so they import the same installed packages
    (a worker on another Python is the most common failure of PySpark labs)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    driver_host = os.environ.get("LAB_DRIVER_HOST", "127.0.0.1")  # a container name in Compose
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0")
    builder = (SparkSession.builder.appName(app_name).master(spark_master())
               .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions()))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", os.environ.get("LAB_SPARK_UI", "false"))
               .config("spark.driver.bindAddress", "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0")
               .config("spark.driver.host", driver_host)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.chunkBase64String.enabled", "false"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("LAB_SPARK_LOG_LEVEL", "WARN"))
    return spark


def kafka_format(spark: SparkSession) -> str:
    """'kafka' when Spark's official connector is loadable, else our Python source (registered)."""
    choice = os.environ.get("LAB_KAFKA_FORMAT")
    if choice is None:
        choice = OFFICIAL if _official_connector_present(spark) else "labkafka"
    if choice != OFFICIAL:
        from joinlab.spark_kafka import NAME, KafkaDataSource
        if spark.conf.get("joinlab.kafka.registered", "false") != "true":
            spark.dataSource.register(KafkaDataSource)
            spark.conf.set("joinlab.kafka.registered", "true")
        choice = NAME
    return choice


def _official_connector_present(spark: SparkSession) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        return True
    except Exception:
        return False


def read_kafka(spark: SparkSession, bootstrap: str, topics: list[str], starting: str = "earliest",
               max_offsets_per_trigger: int | None = None, fail_on_data_loss: bool = True) -> DataFrame:
    """A streaming DataFrame over `topics` with the official connector's columns. With
    `fail_on_data_loss` (the default) a query stops when its checkpointed offsets are gone from the
    broker (joinlab.spark_kafka.continuity); without it, it carries on from what exists."""
    reader = (spark.readStream.format(kafka_format(spark))
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", ",".join(topics))
              .option("startingOffsets", starting)
              .option("failOnDataLoss", str(fail_on_data_loss).lower()))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()


def read_kafka_batch(spark: SparkSession, bootstrap: str, topics: list[str]) -> DataFrame:
    """Everything currently in `topics`, as a batch DataFrame."""
    return (spark.read.format(kafka_format(spark)).option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load())


def kafka_sink(df: DataFrame, bootstrap: str, checkpoint: str) -> DataStreamWriter:
    """A writeStream to Kafka; rows carry `topic`, `key`, `value`."""
    return (df.writeStream.format(kafka_format(df.sparkSession))
            .option("kafka.bootstrap.servers", bootstrap)
            .option("checkpointLocation", checkpoint))
