"""Is a checkpoint's position still a position in the broker's log? Pure logic, decided on the driver.

Why the source checks this itself: a restarted in-memory broker (or a topic deleted and created
again) starts its offsets at 0 while the checkpoint keeps the old ones. Reading from the
checkpointed offsets then finds nothing, and a query "succeeds" with no output. As Spark's own
Kafka source does with failOnDataLoss=true (the default), the query must stop and say so.

Every offset the source hands Spark carries the id of the cluster it was read from (CLUSTER, not
a legal topic name, so it can never clash with one); a checkpoint made against another broker is
recognised even where its offsets happen to look plausible.
"""
from __future__ import annotations

from dataclasses import dataclass

from joinlab.spark_kafka.planning import Offsets

CLUSTER = "@cluster"


class DataLossError(RuntimeError):
    """Records the query should read are gone; the message says which, and what to run."""


def positions(offsets: dict) -> Offsets:
    """The per-partition next offsets of a source offset, without its cluster stamp."""
    return {topic: parts for topic, parts in offsets.items() if topic != CLUSTER}


def cluster_of(offsets: dict) -> str | None:
    return offsets.get(CLUSTER)


def stamped(offsets: Offsets, cluster: str | None) -> dict:
    return {CLUSTER: cluster, **offsets} if cluster else dict(offsets)


@dataclass(frozen=True)
class Loss:
    topic: str
    partition: str
    checkpointed: int
    earliest: int | None  # None: the partition is gone
    latest: int | None

    def describe(self) -> str:
        where = f"topic {self.topic} partition {self.partition}: checkpointed offset {self.checkpointed}"
        if self.latest is None:
            return f"{where}, but the partition no longer exists"
        if self.checkpointed > self.latest:
            return f"{where}, but the partition now ends at offset {self.latest} (its offsets went backwards)"
        if self.earliest is not None and self.checkpointed < self.earliest:
            return (f"{where}, but the partition now begins at offset {self.earliest} "
                    f"(offsets {self.checkpointed} to {self.earliest - 1} were deleted before they were read)")
        return f"{where}, but on this broker the partition holds offsets {self.earliest} to {self.latest - 1}: not the records the checkpoint counted"


def losses(start: Offsets, earliest: Offsets, latest: Offsets) -> list[Loss]:
    """Partitions whose checkpointed next offset `start` is not within [earliest, latest] now."""
    found = []
    for topic in sorted(start):
        for part in sorted(start[topic], key=int):
            offset = start[topic][part]
            low, high = earliest.get(topic, {}).get(part), latest.get(topic, {}).get(part)
            if high is None or offset > high or (low is not None and offset < low):
                found.append(Loss(topic, part, offset, low, high))
    return found


def message(lost: list[Loss], checkpointed_cluster: str | None, current_cluster: str | None) -> str:
    """What happened, where, and the two ways on - one paragraph a person can act on."""
    lines = ["The checkpoint's Kafka offsets are not in the broker's log any more: reading on would "
             "silently skip or miss records (failOnDataLoss=true)."]
    if checkpointed_cluster and current_cluster and checkpointed_cluster != current_cluster:
        lines.append(f"The checkpoint was made against broker cluster {checkpointed_cluster}; the broker now "
                     f"answering is cluster {current_cluster} (was it restarted? the embedded broker keeps "
                     "topics in memory, so a restart empties them).")
    shown = lost[:6]
    lines += [f"  {loss.describe()}" for loss in shown]
    if len(lost) > len(shown):
        lines.append(f"  ... and {len(lost) - len(shown)} more partitions")
    lines.append("To start again from what the topics hold now, delete the checkpoint: "
                 "`joinlab run PATTERN --reset`. To carry on from what exists instead, "
                 "run with failOnDataLoss=false (`joinlab run PATTERN --fail-on-data-loss false`).")
    return "\n".join(lines)


def check(start: dict, earliest: Offsets, latest: Offsets, current_cluster: str | None,
          fail_on_data_loss: bool) -> None:
    """Raise DataLossError when `start` (a checkpointed source offset) cannot be read on from."""
    if not fail_on_data_loss:
        return
    before = cluster_of(start)
    lost = losses(positions(start), earliest, latest)
    moved = before is not None and current_cluster is not None and before != current_cluster
    if moved and not lost:  # another broker whose offsets happen to reach as far
        lost = [Loss(t, p, o, earliest.get(t, {}).get(p), latest.get(t, {}).get(p))
                for t, parts in sorted(positions(start).items()) for p, o in sorted(parts.items(), key=lambda i: int(i[0]))]
    if lost:
        raise DataLossError(message(lost, before, current_cluster))


def resume_points(start: dict, end: Offsets, end_cluster: str | None) -> Offsets:
    """Where each partition's next range begins: the checkpointed offset, except where data was
    lost and the query carries on (failOnDataLoss=false): from 0 when the cluster changed or the
    offsets went backwards (the reader then skips to the log start). A function of (start, end)
    only, so a replayed micro-batch plans the same ranges."""
    before = cluster_of(start)
    if before and end_cluster and before != end_cluster:
        return {}
    return {t: {p: (o if o <= end.get(t, {}).get(p, o) else 0) for p, o in parts.items()}
            for t, parts in positions(start).items()}
