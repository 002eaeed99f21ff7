"""The data source Spark registers: batch reader, stream reader and writers, under the name NAME."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from joinlab.spark_kafka.continuity import check, cluster_of, positions, resume_points, stamped
from joinlab.spark_kafka.fetch import read_task
from joinlab.spark_kafka.offsets import OffsetOracle
from joinlab.spark_kafka.options import KafkaOptions, read_schema
from joinlab.spark_kafka.planning import Offsets, ReadTask, cap, plan_tasks, rate_limit

# Spark refuses a Python source named "kafka" (DATA_SOURCE_ALREADY_EXISTS), hence our own name.
NAME = "labkafka"


class KafkaDataSource(DataSource):
    """Kafka for Spark with the official connector's options and columns."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def __init__(self, options):
        super().__init__(options)
        self.kafka = KafkaOptions.parse(options)

    def schema(self):
        return read_schema(self.kafka.include_headers)

    def reader(self, schema):
        self.kafka.require_topics()
        return KafkaBatchReader(self.kafka)

    def streamReader(self, schema):
        self.kafka.require_topics()
        return KafkaStreamReader(self.kafka)

    def writer(self, schema, overwrite):
        from joinlab.spark_kafka.sink import KafkaBatchWriter
        return KafkaBatchWriter(self.kafka, schema)

    def streamWriter(self, schema, overwrite):
        from joinlab.spark_kafka.sink import KafkaStreamWriter
        return KafkaStreamWriter(self.kafka, schema)


class KafkaBatchReader(DataSourceReader):
    """`spark.read`: startingOffsets (default earliest) to endingOffsets (default latest)."""

    def __init__(self, options: KafkaOptions):
        self.options = options

    def partitions(self):
        oracle = OffsetOracle(self.options)
        try:
            start_spec = self.options.starting_offsets if self.options.starting_offsets != "latest" else "earliest"
            return plan_tasks(oracle.resolve(start_spec), oracle.resolve(self.options.ending_offsets),
                              self.options.task_records)
        finally:
            oracle.close()

    def read(self, partition: ReadTask):
        return read_task(self.options, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream`: offsets are per-partition next offsets, checkpointed by Spark."""

    def __init__(self, options: KafkaOptions):
        self.options = options
        self.oracle = OffsetOracle(options)
        self._available_now_target: Offsets | None = None
        self._last_seen: Offsets | None = None
        self._checked = False  # has this run compared its checkpoint with the broker yet?

    def initialOffset(self) -> dict:
        return stamped(self.oracle.resolve(self.options.starting_offsets), self.oracle.cluster_id())

    def _continuing(self, *checkpointed: dict) -> tuple[Offsets, str | None]:
        """(the partitions' true ends, the cluster id) now, after making sure the checkpointed
        offsets can be read on from (joinlab.spark_kafka.continuity)."""
        earliest, latest, cluster = self.oracle.earliest(), self.oracle.latest(), self.oracle.cluster_id()
        for offsets in checkpointed:
            check(offsets, earliest, latest, cluster, self.options.fail_on_data_loss)
        self._checked = True
        return latest, cluster

    def getDefaultReadLimit(self):
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        self._last_seen, cluster = self._continuing(start)
        begin = resume_points(start, self._last_seen, cluster)
        latest = cap(self._last_seen, self._available_now_target)
        latest = {t: {p: max(o, begin.get(t, {}).get(p, 0)) for p, o in parts.items()} for t, parts in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return stamped(latest, cluster)

    def reportLatestOffset(self):
        return self._last_seen

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self.oracle.latest()

    def partitions(self, start: dict, end: dict):
        if not self._checked:  # a restart replays its last planned batch without asking latestOffset
            self._continuing(start, end)
        ends = positions(end)
        return plan_tasks(resume_points(start, ends, cluster_of(end)), ends, self.options.task_records)

    def read(self, partition: ReadTask):
        return read_task(self.options, partition)

    def stop(self) -> None:
        self.oracle.close()
