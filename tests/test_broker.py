"""The embedded broker: readiness, clear errors, background control, and the end-offset workaround."""
import json
import socket
import subprocess
import sys

import pytest

from joinlab import broker
from joinlab.broker import BrokerError, EmbeddedBroker
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer, producer, read_topics


def test_a_taken_port_is_a_clear_error_not_a_silent_exit(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(BrokerError, match=f"(exited|did not answer).*Choose another port than {port}"):
            broker.start_broker(port=port, log_path=tmp_path / "b.log", ready_timeout_s=5)


def test_readiness_means_our_cluster_id_answers(tmp_path):
    with EmbeddedBroker(log_path=tmp_path / "b.log") as b:
        assert broker.answers_as(b.bootstrap_servers, b.info.cluster_id)
        assert not broker.answers_as(b.bootstrap_servers, "someone-else")
    assert not broker.answers_as(b.bootstrap_servers, None, timeout_s=0.5)


def test_a_missing_binary_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("CALF_TANSU_BIN", str(tmp_path / "no-such-tansu"))
    with pytest.raises(BrokerError, match="CALF_TANSU_BIN|KAFKA_BOOTSTRAP_SERVERS"):
        broker.broker_binary()


def test_cli_starts_reports_and_stops_the_background_broker(tmp_path):
    env = {"LAB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "joinlab", "broker", *args], env=env,
                                       capture_output=True, text=True, timeout=60)
    assert run("status").returncode == 1
    started = run("start")
    assert started.returncode == 0, started.stderr
    state = json.loads((tmp_path / "broker.json").read_text())
    assert broker.answers_as(f"127.0.0.1:{state['port']}", state["cluster_id"])
    assert f"127.0.0.1:{state['port']}" in run("status").stdout
    assert run("stop").returncode == 0
    assert not (tmp_path / "broker.json").exists()
    assert not broker.answers_as(f"127.0.0.1:{state['port']}", None, timeout_s=0.5)


def test_no_broker_is_a_clear_cli_error(tmp_path):
    env = {"LAB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "joinlab", "verify", "tweet-views"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "make broker-start" in done.stderr and "KAFKA_BOOTSTRAP_SERVERS" in done.stderr


def test_end_offsets_are_true_even_where_list_offsets_under_reports(bootstrap):
    create_topics(bootstrap, ["t"], partitions=2)
    p = producer(bootstrap, linger_ms=50)
    for i in range(1000):
        p.send("t", value=b"x", partition=i % 2)
    p.flush()
    consumer = plain_consumer(bootstrap)
    tps = partitions_of(consumer, ["t"])
    assert {tp.partition: n for tp, n in end_offsets(consumer, tps).items()} == {0: 500, 1: 500}
    for i in range(3):  # the same client keeps answering right as the log grows
        p.send("t", value=b"y", partition=0)
        p.flush()
        assert end_offsets(consumer, tps)[tps[0]] == 501 + i
    assert len(read_topics(bootstrap, ["t"])) == 1003
