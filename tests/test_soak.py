"""`make soak`'s lag column: records on the input topics the job has not read yet (pure logic; the
soak itself is the long run, not part of `make test`)."""
import json

from joinlab.soak import lag, read_to

# What the lab connector reports for a batch that took everything there was when it was planned:
# latestOffset equals endOffset (so the progress alone always says lag 0), the cluster stamp beside.
PROGRESS = {"batchId": 7, "sources": [{
    "description": "labkafka",
    "startOffset": json.dumps({"@cluster": "joinlab-1", "users": {"0": 3, "1": 2}, "tweets": {"0": 10, "1": 8}}),
    "endOffset": json.dumps({"@cluster": "joinlab-1", "users": {"0": 5, "1": 2}, "tweets": {"0": 12, "1": 9}}),
    "latestOffset": json.dumps({"users": {"0": 5, "1": 2}, "tweets": {"0": 12, "1": 9}}),
}]}


def test_the_lag_is_what_the_broker_holds_beyond_the_last_batch_even_when_the_progress_shows_none():
    read = read_to(PROGRESS)
    assert read == {"users": {"0": 5, "1": 2}, "tweets": {"0": 12, "1": 9}}
    assert lag(read, read) == 0
    # 40 more tweets arrived on partition 1 and 3 users on partition 0 while the batch ran
    assert lag(read, {"users": {"0": 8, "1": 2}, "tweets": {"0": 12, "1": 49}}) == 43


def test_a_partition_never_read_counts_from_zero_and_offsets_behind_the_read_ones_count_nothing():
    read = read_to(PROGRESS)
    assert lag(read, {"users": {"0": 5, "1": 2, "2": 6}, "tweets": {"0": 12, "1": 9}}) == 6
    assert lag(read, {"users": {"0": 4}, "tweets": {}}) == 0


def test_before_the_first_batch_everything_on_the_topics_is_lag():
    assert read_to(None) == {}
    assert lag(read_to({"sources": [{"endOffset": None}]}), {"users": {"0": 4, "1": 1}}) == 5
    parsed = {"sources": [{"endOffset": {"users": {"0": 4}}}]}  # an already parsed offset counts alike
    assert lag(read_to(parsed), {"users": {"0": 9}}) == 5
