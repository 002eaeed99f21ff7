"""A query that copies Kafka records to a JSON file sink, for the SIGKILL exactly-once test.

usage: python -m tests.programs.source_to_files BOOTSTRAP TOPIC CHECKPOINT OUTPUT (live|catch-up)
"""
import sys

from pyspark.sql import functions as F

from joinlab.kit.kafka import Kafka, read
from joinlab.spark import session

bootstrap, topic, checkpoint, output, mode = sys.argv[1:6]
spark = session("source-to-files")
stream = read(spark, Kafka(bootstrap, max_offsets_per_trigger=400), [topic])
writer = (stream.select("partition", "offset", F.col("value").cast("string").alias("value"))
          .writeStream.format("json").option("path", output).option("checkpointLocation", checkpoint))
writer = writer.trigger(availableNow=True) if mode == "catch-up" else writer.trigger(processingTime="0 seconds")
writer.start().awaitTermination()
