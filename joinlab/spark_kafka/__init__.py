"""A Kafka source and sink for Spark, on Spark's Python Data Source API.

Spark's own connector (spark-sql-kafka-0-10) is not in the pyspark wheel. This one keeps its
option names and its columns, so a job reads and writes the same way with either; use
`joinlab.spark.kafka_format()` to pick, never branch in a job.
"""
from joinlab.spark_kafka.source import NAME, KafkaDataSource

__all__ = ["NAME", "KafkaDataSource"]
