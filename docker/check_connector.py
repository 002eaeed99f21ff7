"""Prove that Spark's Kafka connector, put into pyspark's jars folder by the image build
(docker/install_connector.py), loads in a session with nothing added: its classes and the ones it
needs beside Spark's own (kafka-clients, commons-pool2), the way `format("kafka")` loads them."""
from pyspark.sql import SparkSession

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
