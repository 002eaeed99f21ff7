"""`joinlab topics list` and `joinlab topics tail` against a real broker (KAFKA_BOOTSTRAP_SERVERS)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

from joinlab.topics import create_topics, producer
from tests.conftest import ROOT, wait_for

# Kafka times within the embedded broker's retention (24 hours, checked every minute): a fixed day
# in the past would be deleted while a test reads it. A whole minute, an hour ago.
BASE_MS = (int(time.time()) // 60 - 60) * 60_000


def joinlab(bootstrap: str, *args: str, **kwargs):
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return subprocess.run([sys.executable, "-m", "joinlab", "topics", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, **kwargs)


def fill(bootstrap: str, topic: str, n: int, first: int = 0) -> None:
    """`n` JSON records {"i": first..}, spread over 3 partitions, 1 s of Kafka time apart."""
    p = producer(bootstrap)
    for i in range(first, first + n):
        p.send(topic, key=f"k{i}".encode(), value=json.dumps({"i": i}).encode(), partition=i % 3,
               timestamp_ms=BASE_MS + i * 1000)
    p.flush()
    p.close()


def shown(output: str) -> list[tuple[str, int, int, str]]:
    """(topic, partition, offset, key) of each record `tail` printed, in order."""
    heads = [line.split() for line in output.splitlines() if "  partition " in line]
    return [(h[0], int(h[2]), int(h[4]), h[-1]) for h in heads]


def test_list_shows_every_topic_with_its_partitions_and_records(bootstrap):
    create_topics(bootstrap, ["alpha", "beta"], partitions=3)
    create_topics(bootstrap, ["gamma"], partitions=1)
    fill(bootstrap, "alpha", 7)
    done = joinlab(bootstrap, "list")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[:3] == ["TOPIC", "PARTITIONS", "RECORDS"] and bootstrap in header
    table = {row.split()[0]: (int(row.split()[1]), int(row.split()[2])) for row in rows}
    assert {k: table[k] for k in ("alpha", "beta", "gamma")} == {"alpha": (3, 7), "beta": (3, 0), "gamma": (1, 0)}
    assert not any(name.startswith("__") for name in table)


def test_tail_prints_the_last_n_records_across_partitions_with_their_place_time_and_value(bootstrap):
    create_topics(bootstrap, ["views"], partitions=3)
    fill(bootstrap, "views", 10)
    done = joinlab(bootstrap, "tail", "views", "-n", "3")
    assert done.returncode == 0, done.stderr
    # the newest three by Kafka time: i = 7, 8, 9 on partitions 1, 2, 0 (each the partition's 3rd/4th record)
    assert shown(done.stdout) == [("views", 1, 2, "k7"), ("views", 2, 2, "k8"), ("views", 0, 3, "k9")]
    first = done.stdout.split("\n")[:4]
    at = datetime.fromtimestamp((BASE_MS + 7000) / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.000 UTC")
    assert first[0] == f"views  partition 1  offset 2  {at}  key k7"
    assert json.loads("\n".join(first[1:4])) == {"i": 7}  # the value, pretty-printed
    everything = joinlab(bootstrap, "tail", "views", "--from-beginning", "--compact")
    assert [key for *_, key in shown(everything.stdout)] == [f"k{i}" for i in range(10)]
    assert '  {"i": 0}' in everything.stdout.splitlines()


def test_tail_shows_a_dead_letter_with_its_reason_and_what_it_rejected(bootstrap):
    create_topics(bootstrap, ["x-dlq"], partitions=1)
    letter = {"job": "tweet-views", "reason": "missing field: handle", "source_topic": "users",
              "source_partition": 1, "source_offset": 82, "key": "1139", "value": '{"user_id":1139}',
              "value_base64": "eyJ1c2VyX2lkIjoxMTM5fQ=="}
    p = producer(bootstrap)
    p.send("x-dlq", key=b"1139", value=json.dumps(letter).encode())
    p.send("x-dlq", key=None, value=b"\x00not json")
    p.flush()
    done = joinlab(bootstrap, "tail", "x-dlq")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "  DEAD LETTER  missing field: handle  (from users partition 1 offset 82, job tweet-views)"
    assert lines[2] == '  rejected value: {"user_id":1139}'
    assert lines[3].endswith("key null") and lines[4].startswith("  (not JSON)")


def test_tail_follow_prints_new_records_as_they_arrive_until_ctrl_c(bootstrap, tmp_path):
    create_topics(bootstrap, ["live"], partitions=3)
    fill(bootstrap, "live", 4)
    out = tmp_path / "tail.out"
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    with open(out, "w") as stdout:
        process = subprocess.Popen([sys.executable, "-m", "joinlab", "topics", "tail", "live", "-n", "2", "--follow"],
                                   cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(shown(out.read_text())) == 2, 60, "the last two records")
            fill(bootstrap, "live", 3, first=4)
            wait_for(lambda: len(shown(out.read_text())) == 5, 60, "the three new records")
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 0, process.stderr.read()
        finally:
            process.kill()
            process.wait()
    keys = [key for *_, key in shown(out.read_text())]
    assert keys[:2] == ["k2", "k3"] and sorted(keys[2:]) == ["k4", "k5", "k6"]


def test_tail_of_an_unknown_topic_names_the_topics_there(bootstrap):
    create_topics(bootstrap, ["present"], partitions=1)
    done = joinlab(bootstrap, "tail", "absent")
    assert done.returncode == 2
    assert "no topic 'absent'" in done.stderr and "present" in done.stderr
