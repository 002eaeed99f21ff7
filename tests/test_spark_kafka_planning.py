"""Pure unit tests of the source's offset planning and options (no broker, no Spark session)."""
import pytest

from joinlab.spark_kafka.options import KafkaOptions, parse_offsets_spec
from joinlab.spark_kafka.planning import OffsetRange, ReadTask, cap, plan_ranges, plan_tasks, rate_limit


def test_plan_ranges_is_one_task_per_non_empty_partition_in_a_fixed_order():
    start = {"b": {"0": 5, "1": 7}, "a": {"0": 0}}
    end = {"b": {"1": 9, "0": 5}, "a": {"0": 3}}
    assert plan_ranges(start, end) == [OffsetRange("a", 0, 0, 3), OffsetRange("b", 1, 7, 9)]
    assert plan_ranges(start, end) == plan_ranges(dict(reversed(start.items())), dict(reversed(end.items())))


def test_small_ranges_share_a_read_task_and_a_big_range_gets_its_own():
    start = {"a": {"0": 0, "1": 0, "2": 0}, "b": {"0": 0}}
    end = {"a": {"0": 30, "1": 40, "2": 5000}, "b": {"0": 20}}
    a0, a1, a2, b0 = OffsetRange("a", 0, 0, 30), OffsetRange("a", 1, 0, 40), OffsetRange("a", 2, 0, 5000), OffsetRange("b", 0, 0, 20)
    assert plan_tasks(start, end, task_records=100) == [ReadTask((a0, a1)), ReadTask((a2,)), ReadTask((b0,))]
    assert plan_tasks(start, end, task_records=10_000) == [ReadTask((a0, a1, a2, b0))]
    assert plan_tasks(start, end) == [ReadTask((r,)) for r in plan_ranges(start, end)]  # 0: one task per range


def test_a_partition_missing_from_start_is_new_and_read_from_zero():
    assert plan_ranges({"t": {"0": 4}}, {"t": {"0": 4, "1": 6}}) == [OffsetRange("t", 1, 0, 6)]


def test_rate_limit_shares_the_limit_by_backlog_and_always_progresses():
    start = {"t": {"0": 0, "1": 0, "2": 100}}
    latest = {"t": {"0": 900, "1": 99, "2": 101}}
    limited = rate_limit(start, latest, 100)
    assert limited == {"t": {"0": 90, "1": 9, "2": 101}}  # 1-record backlog still moves (share < 1 rounds up)
    assert rate_limit(start, latest, 10_000) == latest


def test_cap_never_passes_the_available_now_target():
    assert cap({"t": {"0": 10, "1": 3}}, {"t": {"0": 7}}) == {"t": {"0": 7, "1": 3}}
    assert cap({"t": {"0": 10}}, None) == {"t": {"0": 10}}


def test_offsets_spec_accepts_the_official_forms_and_rejects_others():
    assert parse_offsets_spec("earliest") == "earliest"
    assert parse_offsets_spec('{"t": {"0": 23, "1": -2}}') == {"t": {"0": 23, "1": -2}}
    with pytest.raises(ValueError, match="earliest"):
        parse_offsets_spec("yesterday")


def test_options_name_what_is_missing():
    with pytest.raises(ValueError, match="kafka.bootstrap.servers"):
        KafkaOptions.parse({"subscribe": "t"})
    with pytest.raises(ValueError, match="subscribe"):
        KafkaOptions.parse({"kafka.bootstrap.servers": "x:1"}).require_topics()
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger"):
        KafkaOptions.parse({"kafka.bootstrap.servers": "x:1", "maxOffsetsPerTrigger": "0"})
