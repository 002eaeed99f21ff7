"""The Spark jobs, one module per pattern; each reads and writes live Kafka topics."""
