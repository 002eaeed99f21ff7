"""`make soak`'s lag column (records on the input topics the job has not read yet) and its slices
(each one later data over the same population, or over new ids): pure logic; the soak itself is
the long run, not part of `make test`."""
import json

import pytest

from joinlab import patterns
from joinlab.kit.events import parse_time
from perf.soak import ENTITY_IDS, WITHIN_THE_DELAY, _shifted, lag, read_to

# What Spark's Kafka source reports for a batch (offsets as JSON per topic and partition); while the
# batch ran more records arrived, which its progress does not show.
PROGRESS = {"batchId": 7, "sources": [{
    "description": "KafkaV2[Subscribe[users, tweets]]",
    "startOffset": json.dumps({"users": {"0": 3, "1": 2}, "tweets": {"0": 10, "1": 8}}),
    "endOffset": json.dumps({"users": {"0": 5, "1": 2}, "tweets": {"0": 12, "1": 9}}),
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


def _bodies(records):
    out = []
    for r in records:
        try:
            out.append((r.key, json.loads(r.value)))
        except ValueError:
            pass  # the malformed ones
    return out


def _ids(records, name):
    return {body[name] for _, body in _bodies(records) if isinstance(body, dict) and name in body}


@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_with_fixed_keys_a_later_slice_shares_the_population_and_is_otherwise_new_later_data(pattern):
    generate = patterns.generator(pattern).generate
    first = generate(1000, 200)
    first = _shifted(first, 0, 2, ENTITY_IDS)
    second = _shifted(generate(1001, 200), 1, 2, ENTITY_IDS)
    one, two = _bodies(first), _bodies(second)
    kept = [n for n in ENTITY_IDS if _ids(first, n)]
    new = {n for _, b in one if isinstance(b, dict) for n in b if n.endswith("_id") and n not in ENTITY_IDS}
    assert kept, "every pattern keeps some population"
    assert any(_ids(first, n) & _ids(second, n) for n in kept)  # same users / cars / lotteries
    for name in new:  # tweets, sessions, transactions, events: none seen before
        assert not _ids(first, name) & _ids(second, name), name
    latest = max(parse_time(b["event_time"]) for _, b in one if "event_time" in b)
    assert min(parse_time(b["event_time"]) for _, b in two if "event_time" in b) > latest
    for name in ("version", "seq"):  # an update of a kept entity is newer than any before
        if _ids(first, name):
            assert min(_ids(second, name)) > max(_ids(first, name))
    keys_one, keys_two = {k for k, _ in one}, {k for k, _ in two}
    kept_keys = {str(b[n]).encode() for _, b in one for n in kept if n in b}
    assert not (keys_two - kept_keys) & keys_one  # a new id's key is new too
    assert keys_one & keys_two <= kept_keys  # and a shared key is a kept entity's


def test_with_new_keys_a_later_slice_shares_no_id_and_a_malformed_record_is_left_as_it_is():
    first = patterns.generator("tweet-views").generate(1000, 200, disorder=WITHIN_THE_DELAY)
    second = _shifted(first, 2, 3)
    assert not _ids(first, "user_id") & _ids(second, "user_id")
    assert not {k for k, _ in _bodies(first)} & {k for k, _ in _bodies(second)}
    broken = [r for r in first if r.kind != "event" and r.kind != "duplicate"]
    assert broken and all(r in second for r in broken)


def test_memory_counts_the_broker_apart_from_the_jvm_and_the_python_processes():
    """The JVM and Python processes must level off, the in-memory broker grows with what was sent:
    a child holding 200 MiB, standing in for the broker, is counted in its column alone."""
    import subprocess
    import sys

    from perf.soak import memory

    hold = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('ready', flush=True); input()"
    child = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        apart = memory(child.pid)
        together = memory(-1)  # the same processes with nothing set apart: the child is a Python one
    finally:
        child.communicate("")
    assert apart.broker >= 200 and together.broker == 0
    assert apart.python < together.python - 190
