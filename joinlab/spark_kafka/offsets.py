"""Driver-side offsets: resolve startingOffsets and find the true end of every subscribed partition."""
from __future__ import annotations

from kafka import KafkaAdminClient, TopicPartition

from joinlab.spark_kafka.options import EARLIEST, LATEST, KafkaOptions, parse_offsets_spec
from joinlab.spark_kafka.planning import Offsets
from joinlab.topics import end_offsets, partitions_of, plain_consumer


class OffsetOracle:
    """Answers 'where does each partition begin and end now, and on which cluster', keeping its
    client connections."""

    def __init__(self, options: KafkaOptions):
        self.options = options
        self._consumer = None
        self._admin = None

    @property
    def consumer(self):
        if self._consumer is None:
            self._consumer = plain_consumer(self.options.bootstrap_servers)
        return self._consumer

    def _partitions(self) -> list[TopicPartition]:
        return partitions_of(self.consumer, self.options.topics)

    def latest(self) -> Offsets:
        return _as_offsets(end_offsets(self.consumer, self._partitions()))

    def earliest(self) -> Offsets:
        return _as_offsets(self.consumer.beginning_offsets(self._partitions()))

    def cluster_id(self) -> str | None:
        """The id of the cluster answering now (a fresh one per start of the embedded broker)."""
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.options.bootstrap_servers)
        return self._admin.describe_cluster().get("cluster_id")

    def resolve(self, spec: str) -> Offsets:
        """'earliest', 'latest' or JSON with -2/-1 sentinels, as concrete next offsets."""
        parsed = parse_offsets_spec(spec)
        if parsed == "earliest":
            return self.earliest()
        if parsed == "latest":
            return self.latest()
        earliest, latest = self.earliest(), self.latest()
        resolved: Offsets = {}
        for topic, parts in parsed.items():
            for part, offset in parts.items():
                if offset == EARLIEST:
                    offset = earliest.get(topic, {}).get(part, 0)
                elif offset == LATEST:
                    offset = latest.get(topic, {}).get(part, 0)
                resolved.setdefault(topic, {})[part] = offset
        for topic, parts in earliest.items():  # partitions the JSON leaves out start at earliest
            for part, offset in parts.items():
                resolved.setdefault(topic, {}).setdefault(part, offset)
        return resolved

    def close(self) -> None:
        for client in (self._consumer, self._admin):
            if client is not None:
                client.close()
        self._consumer = self._admin = None


def _as_offsets(by_tp: dict[TopicPartition, int]) -> Offsets:
    out: Offsets = {}
    for tp, offset in by_tp.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out
