"""Stream Join Lab: the machinery every join pattern shares.

- ``broker``: the embedded Kafka-protocol broker (Tansu) as a context manager and a daemon.
- ``kafka``: admin and plain-client helpers (topics, true end offsets, reading a topic whole).
- ``spark_kafka``: a Kafka source and sink for Spark on the Python Data Source API.
- ``spark``: the SparkSession and the one helper that picks the Kafka format.
- ``events``: JSON parsing with dead-lettering of malformed or invalid records.
- ``verify``: comparing a job's final output with a batch reference.
"""
