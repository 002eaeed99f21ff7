"""What every pattern's query repeats at its two ends: the Kafka source's and sink's options
(docs/kafka.md). A pattern's query reads and writes in plain sight, with these options:

    raw = spark.readStream.format("kafka").options(**kafka.source(INPUT_TOPICS)).load()
    ...
    return out.writeStream.format("kafka").options(**kafka.sink()).outputMode("append")

`incoming` and `outgoing` are where a run's topic names differ from the pattern's: a participant's
`ann.tweets`, `make up`'s warm-up topics. The query between them sees the pattern's own names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# How long the broker may hold a fetch open: Kafka's default (500 ms) is paid by about every task
# that reads a topic, and a task only reads offsets that exist (docs/kafka.md).
FETCH_MAX_WAIT_MS = "50"

COUNTED = "records_out"  # the name of the per-output-topic counts in each micro-batch's progress


@dataclass(frozen=True)
class Kafka:
    """Where a query reads and writes, and how much it reads per micro-batch."""
    bootstrap: str
    checkpoint: str = ""                  # the sink's checkpointLocation
    input_prefix: str = ""                # before every input topic's name on the broker
    output_prefix: str = ""               # before every output topic's name on the broker
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True        # stop when offsets the checkpoint counts on are gone from the broker
    counted: tuple[str, ...] = ()         # output topics whose rows each micro-batch counts (observedMetrics[COUNTED])
    # The lab's Kafka client settings as `kafka.` options of the source and the sink (security,
    # credentials: the runner passes them in, joinlab.kafka_settings); never shown, they hold secrets.
    settings: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def source(self, topics: list[str], starting: str = "earliest") -> dict[str, str]:
        """The Kafka source's options for reading `topics` (the pattern's names)."""
        options = {"kafka.bootstrap.servers": self.bootstrap,
                   "subscribe": ",".join(self.input_prefix + topic for topic in topics),
                   "startingOffsets": starting,
                   "failOnDataLoss": str(self.fail_on_data_loss).lower(),
                   "kafka.fetch.max.wait.ms": FETCH_MAX_WAIT_MS}
        if self.max_offsets_per_trigger:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        return {**options, **self.settings}

    def sink(self) -> dict[str, str]:
        """The Kafka sink's options; each row's `topic` column says where it goes."""
        return {"kafka.bootstrap.servers": self.bootstrap, "checkpointLocation": self.checkpoint, **self.settings}

    def incoming(self, raw: DataFrame) -> DataFrame:
        """The source's rows under the pattern's topic names."""
        if not self.input_prefix:
            return raw
        return raw.withColumn("topic", F.expr(f"substr(topic, {len(self.input_prefix) + 1})"))

    def outgoing(self, out: DataFrame) -> DataFrame:
        """The query's rows (topic, key, value) to the run's topics, counted per topic when asked."""
        if self.counted:
            out = out.observe(COUNTED, *[F.count_if(F.col("topic") == t).alias(t) for t in self.counted])
        if self.output_prefix:
            out = out.withColumn("topic", F.concat(F.lit(self.output_prefix), "topic"))
        return out


def read(spark, kafka: Kafka, topics: list[str], starting: str = "earliest") -> DataFrame:
    """A streaming DataFrame over `topics`, for what is not a pattern's query (tests, studies)."""
    return spark.readStream.format("kafka").options(**kafka.source(topics, starting)).load()
