"""Prove the connector's classes load the way joinlab.spark looks for them (it picks the official
connector when org.apache.spark.sql.kafka010.KafkaSourceProvider is on the classpath)."""
import os
import sys

from pyspark.sql import SparkSession

if os.environ.get("KAFKA_CONNECTOR", "official") == "labkafka":
    print("KAFKA_CONNECTOR=labkafka: no official connector to check", file=sys.stderr)
    sys.exit(0)

spark = (SparkSession.builder.master("local[1]").appName("connector-check")
         .config("spark.ui.enabled", "false").getOrCreate())
try:
    for cls in ("org.apache.spark.sql.kafka010.KafkaSourceProvider",
                "org.apache.spark.kafka010.KafkaTokenUtil",
                "org.apache.kafka.clients.consumer.KafkaConsumer",
                "org.apache.commons.pool2.impl.GenericKeyedObjectPool"):
        spark._jvm.java.lang.Class.forName(cls)
finally:
    spark.stop()
print("Spark's Kafka connector loads")
