"""The embedded Apache Kafka broker: readiness, clear errors, background control, data that
survives a restart, and retention."""
import json
import socket
import subprocess
import sys

import pytest

from joinlab import broker, jars
from joinlab.broker import BrokerError
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer, producer, read_topics


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(BrokerError, match=f"exited with code .*Choose another port than {port}"):
            broker.start_broker(port=port, log_path=tmp_path / "b.log", data_dir=tmp_path / "kafka")


def test_readiness_means_our_cluster_id_answers(kafka):
    assert broker.answers_as(kafka.bootstrap_servers, kafka.info.cluster_id)
    assert not broker.answers_as(kafka.bootstrap_servers, "someone-else")
    assert not broker.answers_as("127.0.0.1", None), "an address without a port has no broker, it is no error"


def test_missing_jars_say_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_JARS", str(tmp_path / "empty"))
    with pytest.raises(BrokerError, match=r"kafka 4\.\d+\.\d+ is not in the jar cache .*`make install`.*KAFKA_BOOTSTRAP_SERVERS"):
        broker.start_broker(log_path=tmp_path / "b.log", data_dir=tmp_path / "kafka")


def test_cli_starts_reports_and_stops_the_background_broker_and_its_data_survives_a_restart(tmp_path):
    env = {"LAB_HOME": str(tmp_path), "LAB_JARS": str(jars.cache()), "PATH": "/usr/bin:/bin"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "joinlab", "broker", *args], env=env,
                                       capture_output=True, text=True, timeout=120)
    assert run("status").returncode == 1
    started = run("start")
    assert started.returncode == 0, started.stderr
    state = json.loads((tmp_path / "broker.json").read_text())
    bootstrap = f"127.0.0.1:{state['port']}"
    assert broker.answers_as(bootstrap, state["cluster_id"])
    status = run("status").stdout
    assert bootstrap in status and f"Apache Kafka {jars.KAFKA_VERSION}" in status and str(tmp_path / "kafka") in status
    create_topics(bootstrap, ["kept"], partitions=1)
    p = producer(bootstrap)
    for i in range(10):
        p.send("kept", value=str(i).encode())
    p.close()
    try:
        assert run("stop").returncode == 0
        assert not broker.answers_as(bootstrap, None, timeout_s=0.5)
        assert run("start").returncode == 0  # the same log directory, port and cluster
        again = json.loads((tmp_path / "broker.json").read_text())
        assert (again["port"], again["cluster_id"]) == (state["port"], state["cluster_id"])
        assert [r.value for r in read_topics(bootstrap, ["kept"])] == [str(i).encode() for i in range(10)]
    finally:
        assert run("stop").returncode == 0
    assert not (tmp_path / "broker.json").exists()
    assert not broker.answers_as(bootstrap, None, timeout_s=0.5)


def test_no_broker_is_a_clear_cli_error(tmp_path):
    env = {"LAB_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "joinlab", "verify", "tweet-views"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "make broker-start" in done.stderr and "KAFKA_BOOTSTRAP_SERVERS" in done.stderr


def test_topics_get_the_retention_that_bounds_the_disk(bootstrap):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    create_topics(bootstrap, ["t"], partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t")], config_filter="All")
    finally:
        admin.close()
    (by_name,) = described.values()
    configs = {key: data["value"] for key, data in by_name["t"].items()}
    assert configs["retention.bytes"] == broker.RETENTION["log.retention.bytes"]
    assert configs["segment.bytes"] == broker.RETENTION["log.segment.bytes"]
    assert configs["retention.ms"] == str(int(broker.RETENTION["log.retention.hours"]) * 3_600_000)


def test_end_offsets_and_whole_topics(bootstrap):
    create_topics(bootstrap, ["t"], partitions=2)
    p = producer(bootstrap, linger_ms=50)
    for i in range(1000):
        p.send("t", value=b"x", partition=i % 2)
    p.flush()
    consumer = plain_consumer(bootstrap)
    tps = partitions_of(consumer, ["t"])
    assert {tp.partition: n for tp, n in end_offsets(consumer, tps).items()} == {0: 500, 1: 500}
    p.send("t", value=b"y", partition=0)
    p.flush()
    assert end_offsets(consumer, tps)[tps[0]] == 501
    consumer.close()
    assert len(read_topics(bootstrap, ["t"])) == 1001
