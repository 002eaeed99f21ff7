"""The checkpoint-continuity rule of the lab's Kafka source, as pure logic (the same rule against
a restarted broker and real Spark: test_spark_kafka_source.py, test_chaos.py)."""
import pytest

from joinlab.spark_kafka.continuity import (CLUSTER, DataLossError, check, cluster_of, losses, positions,
                                            resume_points, stamped)

START = {CLUSTER: "joinlab-a", "tweets": {"0": 10, "1": 7}, "users": {"0": 3}}


def test_a_checkpoint_inside_the_log_on_the_same_cluster_reads_on():
    check(START, {"tweets": {"0": 0, "1": 0}, "users": {"0": 0}}, {"tweets": {"0": 12, "1": 7}, "users": {"0": 3}},
          "joinlab-a", fail_on_data_loss=True)


def test_offsets_that_went_backwards_a_partition_gone_and_deleted_records_are_each_named():
    lost = losses(positions(START), earliest={"tweets": {"0": 0}, "users": {"0": 5}},
                  latest={"tweets": {"0": 4}, "users": {"0": 9}})
    assert [(loss.topic, loss.partition) for loss in lost] == [("tweets", "0"), ("tweets", "1"), ("users", "0")]
    described = [loss.describe() for loss in lost]
    assert "checkpointed offset 10, but the partition now ends at offset 4 (its offsets went backwards)" in described[0]
    assert "partition 1: checkpointed offset 7, but the partition no longer exists" in described[1]
    assert "offsets 3 to 4 were deleted before they were read" in described[2]


def test_the_error_names_both_clusters_every_partition_and_both_ways_on():
    with pytest.raises(DataLossError) as raised:
        check(START, {"tweets": {"0": 0, "1": 0}, "users": {"0": 0}}, {"tweets": {"0": 2, "1": 2}, "users": {"0": 1}},
              "joinlab-b", fail_on_data_loss=True)
    text = str(raised.value)
    assert "made against broker cluster joinlab-a; the broker now answering is cluster joinlab-b" in text
    assert "topic tweets partition 0: checkpointed offset 10, but the partition now ends at offset 2" in text
    assert "topic users partition 0: checkpointed offset 3, but the partition now ends at offset 1" in text
    assert "`joinlab run PATTERN --reset`" in text and "failOnDataLoss=false" in text


def test_another_cluster_is_data_loss_even_where_its_offsets_look_plausible():
    """The issue's case: the same generator run again on a restarted broker fills the partitions
    to exactly the checkpointed offsets; only the cluster id tells the two logs apart."""
    same = {"tweets": {"0": 10, "1": 7}, "users": {"0": 3}}
    with pytest.raises(DataLossError, match="not the records the checkpoint counted"):
        check(START, {"tweets": {"0": 0, "1": 0}, "users": {"0": 0}}, same, "joinlab-b", fail_on_data_loss=True)


def test_without_fail_on_data_loss_the_query_carries_on_from_what_exists():
    check(START, {}, {}, "joinlab-b", fail_on_data_loss=False)  # no error
    # another cluster: every partition from its start (the reader skips to the log start)
    assert resume_points(START, {"tweets": {"0": 20}}, "joinlab-b") == {}
    # same cluster: a partition whose offsets went backwards restarts from 0, the others go on
    assert resume_points(START, {"tweets": {"0": 4, "1": 9}, "users": {"0": 3}}, "joinlab-a") == \
        {"tweets": {"0": 0, "1": 7}, "users": {"0": 3}}


def test_an_unstamped_checkpoint_still_gets_the_offset_checks():
    """Checkpoints written before offsets carried their cluster: no cluster rule, the rest holds."""
    old = positions(START)
    assert cluster_of(old) is None and stamped(old, None) == old
    check(old, {}, {"tweets": {"0": 10, "1": 7}, "users": {"0": 3}}, "joinlab-b", fail_on_data_loss=True)
    with pytest.raises(DataLossError, match="went backwards"):
        check(old, {}, {"tweets": {"0": 1, "1": 7}, "users": {"0": 3}}, "joinlab-b", fail_on_data_loss=True)
