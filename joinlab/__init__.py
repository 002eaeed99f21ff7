"""Stream Join Lab: the machinery every join pattern shares.

- ``jars``: the JVM parts (Apache Kafka, Spark's Kafka connector), fetched with Maven.
- ``broker``: the embedded Apache Kafka broker (one KRaft node) as a context manager and a daemon.
- ``topics``: admin and plain-client helpers (topics, end offsets, reading a topic whole).
- ``spark``: the SparkSession, with Spark's own Kafka connector.
- ``events``: JSON parsing with dead-lettering of malformed or invalid records.
- ``verify``: comparing a job's final output with a batch reference.
"""
