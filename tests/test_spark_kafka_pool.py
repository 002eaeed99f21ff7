"""The per-worker pool of Kafka clients (joinlab.spark_kafka.pool) and the sink's use of it: reuse
per configuration, a new client for a new bootstrap, and a failed task never hands its producer on."""
import pyarrow as pa
import pytest

from joinlab.spark_kafka import pool
from joinlab.spark_kafka.options import KafkaOptions
from joinlab.spark_kafka.sink import produce_batches
from joinlab.topics import create_topics, read_topics


class Client:
    def __init__(self, config):
        self.config, self.closed = config, False

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def empty_pool():
    pool.close_all()
    yield
    pool.close_all()


def test_a_client_is_reused_per_configuration_and_a_new_configuration_gets_its_own():
    with pool.borrowed("producer", {"bootstrap.servers": "a:1"}, Client) as first:
        pass
    with pool.borrowed("producer", {"bootstrap.servers": "a:1"}, Client) as again:
        assert again is first and not first.closed
    with pool.borrowed("producer", {"bootstrap.servers": "b:2"}, Client) as other:
        assert other is not first


def test_a_block_that_raises_closes_its_client_and_the_next_borrower_gets_a_new_one():
    with pytest.raises(RuntimeError):
        with pool.borrowed("producer", {"bootstrap.servers": "a:1"}, Client) as failed:
            raise RuntimeError("delivery failed")
    assert failed.closed
    with pool.borrowed("producer", {"bootstrap.servers": "a:1"}, Client) as fresh:
        assert fresh is not failed


def test_a_client_that_is_not_reusable_is_closed_and_pooling_off_closes_every_client():
    with pool.borrowed("producer", {"x": 1}, Client, reusable=lambda c: False) as broken:
        pass
    assert broken.closed
    with pool.borrowed("producer", {"x": 1}, Client, enabled=False) as once:
        pass
    assert once.closed


def test_the_least_recently_used_clients_beyond_the_limit_are_closed():
    clients = []
    for i in range(pool.MAX_CLIENTS + 2):
        with pool.borrowed("consumer", {"bootstrap.servers": f"h:{i}"}, Client) as c:
            clients.append(c)
    with pool.borrowed("consumer", {"bootstrap.servers": "h:new"}, Client):
        pass
    assert [c.closed for c in clients] == [True, True] + [False] * pool.MAX_CLIENTS  # oldest first


def options(bootstrap, topic="out"):
    return KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic})


def rows(values):
    return [pa.RecordBatch.from_pydict({"value": values})]


def pooled_producers():
    return [client for (kind, _), (client, _) in pool._idle.items() if kind == "producer"]


@pytest.fixture
def broker(bootstrap):
    """The test's broker; the pool is emptied before the broker stops (it waits for open connections)."""
    yield bootstrap
    pool.close_all()


@pytest.mark.spark
def test_sink_tasks_reuse_one_producer_and_a_failed_task_drops_it(broker):
    bootstrap = broker
    create_topics(bootstrap, ["out"])
    assert produce_batches(options(bootstrap), rows([b"a", b"b"])).records == 2
    [producer] = pooled_producers()
    assert produce_batches(options(bootstrap), rows([b"c"])).records == 1
    assert pooled_producers() == [producer], "the second task must reuse the first task's producer"
    with pytest.raises(Exception, match="(?i)too large|MSG_SIZE"):
        produce_batches(options(bootstrap), rows([b"d", b"x" * 2_000_000]))
    assert pooled_producers() == [], "a producer whose task failed must not be reused"
    assert produce_batches(options(bootstrap), rows([b"e"])).records == 1
    assert pooled_producers() and pooled_producers() != [producer]
    values = sorted(r.value for r in read_topics(bootstrap, ["out"]))
    assert {b"a", b"b", b"c", b"e"} <= set(values) and b"x" * 2_000_000 not in values


def test_pooled_clients_of_a_stopped_broker_report_it_once_instead_of_flooding_stderr(tmp_path):
    """A process whose pooled producer and consumer outlive their broker: while they sit idle in the
    pool they print nothing (librdkafka's default re-bootstrap printed ~20 `%3|...|FAIL|` lines a
    second per consumer), and when a read uses the consumer again the loss is reported once, in one
    line naming the broker, and the read fails with its own error."""
    import subprocess
    import sys

    from joinlab.broker import EmbeddedBroker
    from tests.conftest import ROOT
    with EmbeddedBroker(log_path=tmp_path / "broker.log") as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, ["out"])
        program = subprocess.Popen([sys.executable, "-m", "tests.programs.pooled_clients", bootstrap, "out", "3"],
                                   cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        if program.stdout.readline().strip() != "pooled":
            program.kill()
            pytest.fail("the program did not get its clients pooled:\n" + "\n".join(program.communicate()))
    out, err = program.communicate("go\n", timeout=120)
    assert program.returncode == 0, err
    assert out.splitlines()[-1] == "read failed: TimeoutError", out
    lines = err.splitlines()
    assert [line for line in lines if line.startswith("%")] == [], err
    reports = [line for line in lines if f"Kafka broker {bootstrap} unreachable" in line]
    assert len(reports) == 1 and reports[0].startswith("joinlab.kafka.client ERROR: "), err
    assert len(lines) <= 3, err


def test_a_pooled_consumer_idle_between_batches_is_not_made_to_wait_longer_each_time(broker, monkeypatch):
    """The pool has a client's connections closed after CONNECTION_IDLE_MS idle. librdkafka counts
    each such close as a failed connection and doubles the delay before the next one, up to 10 s by
    default: a consumer idle between micro-batches then waited seconds before its next fetch (reads
    of a few hundred records took 8-9 s; a long soak stalled). The delay it announces after each idle
    close must stay at the pool's small maximum, however many closes came before."""
    import logging
    import re

    from confluent_kafka import TopicPartition

    from joinlab.spark_kafka.fetch import _new_consumer, consumer_config
    from tests.conftest import wait_for
    lines = []
    log = logging.getLogger("tests.kafka.client")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    log.addHandler(handler)
    monkeypatch.setattr(pool, "_client_log", lambda: log)
    create_topics(broker, ["in"])
    produce_batches(options(broker, "in"), [pa.RecordBatch.from_pydict({"value": [b"a"], "partition": [0]})])
    config = {**consumer_config(options(broker, "in")), "debug": "broker"}
    closes = lambda: sum("Connection max idle time exceeded" in line and "GroupCoordinator" not in line  # noqa: E731
                         for line in lines)  # the partition leader's connection
    try:
        for _ in range(5):  # each round: a read (it needs a connection again), then an idle close
            with pool.borrowed("consumer", config, _new_consumer) as consumer:
                consumer.assign([TopicPartition("in", 0, 0)])
                wait_for(lambda: [m for m in consumer.consume(1, 0.2) if m.error() is None], 30, "the record")
                consumer.unassign()
                before = closes()
                wait_for(lambda: consumer.poll(0.1) is None and closes() > before, 30, "an idle close")
    finally:
        log.removeHandler(handler)
    delays = [int(ms) for ms in re.findall(r"Delaying next reconnect by (\d+)ms", "\n".join(lines))]
    assert closes() >= 5, "\n".join(lines[-40:])
    # (librdkafka announces only a delay it waits out; the jitter adds up to 50%)
    assert max(delays, default=0) <= 1.5 * pool.RECONNECT["reconnect.backoff.max.ms"], delays


def test_a_range_past_the_partitions_end_fails_naming_the_end_its_fetch_reports(broker):
    """A range that asks for more than its partition holds (a broker restarted with fewer records
    than the checkpoint counted) fails with DataLossError naming where the partition now ends.
    That end comes from the fetch: the embedded broker's ListOffsets under-reports it (the first
    offset of the last record batch + 1), which once made the message say "ends at offset 1"."""
    from joinlab.spark_kafka.continuity import DataLossError
    from joinlab.spark_kafka.fetch import read_task
    from joinlab.spark_kafka.planning import OffsetRange, ReadTask
    from joinlab.topics import producer
    create_topics(broker, ["shrunk"], partitions=1)
    send = producer(broker)
    for batch in range(3):  # three record batches: ListOffsets would answer 11
        for i in range(5):
            send.send("shrunk", value=b"%d" % (batch * 5 + i), partition=0)
        send.flush()
    send.close()
    with pytest.raises(DataLossError, match=r"checkpointed offset 20, but the partition now ends at offset 15\b"):
        list(read_task(options(broker, "shrunk"), ReadTask((OffsetRange("shrunk", 0, 0, 20),))))


def test_idle_clients_of_a_broker_that_stopped_are_closed_and_stop_connecting_to_its_port():
    """An idle pooled client of a broker that is gone reconnected to its address 10-20 times a
    second until it was closed (5 minutes idle). Another listener that gets that port next (a
    transformWithState task's state server accepts one connection) then took a Kafka request for
    its own client's: the state server died and the task waited forever. The pool now closes an
    idle client once it reports every broker down, and nothing connects to the port after that."""
    import socket

    from joinlab.broker import EmbeddedBroker
    from joinlab.spark_kafka.fetch import read_task
    from joinlab.spark_kafka.planning import OffsetRange, ReadTask
    from tests.conftest import wait_for
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topics(bootstrap, ["in"])
        produce_batches(options(bootstrap, "in"), [pa.RecordBatch.from_pydict({"value": [b"a"], "partition": [0]})])
        read = KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": "in"})
        assert sum(b.num_rows for b in read_task(read, ReadTask((OffsetRange("in", 0, 0, 1),)))) == 1
        assert len(pool._idle) == 2, "a producer and a consumer, idle in the pool"
    wait_for(lambda: not pool._idle, 30, "the pool closing both clients of the stopped broker")
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(bootstrap.rsplit(":", 1)[1])))
        listener.listen(8)
        listener.settimeout(1.0)
        with pytest.raises(socket.timeout):
            listener.accept()


def test_the_newest_records_of_a_partition_of_thousands_of_batches_are_read(broker):
    """The embedded broker lists every stored batch of a partition on each fetch and stops when the
    fetch's wait has passed, answering offsets it did not reach with nothing (no records, no error).
    With the lab's 1 ms wait a partition's newest records went unreadable after ~2,000 produce
    batches: ten minutes of a steady soak, or 3 s of the writes below. A read that gets nothing
    while the broker reports more asks again with a longer wait."""
    from joinlab.spark_kafka.fetch import read_task
    from joinlab.spark_kafka.planning import OffsetRange, ReadTask
    from joinlab.topics import producer
    batches = 4000
    create_topics(broker, ["many"], partitions=1)
    send = producer(broker, linger_ms=0)
    for i in range(batches):
        send.send("many", value=b"%d" % i, partition=0).get(timeout=10)  # one request, one batch
    send.close()
    read = KafkaOptions.parse({"kafka.bootstrap.servers": broker, "subscribe": "many",
                               "kafkaConsumer.pollTimeoutMs": "20000"})
    out = list(read_task(read, ReadTask((OffsetRange("many", 0, batches - 10, batches),))))
    assert [v.as_py() for b in out for v in b.column("value")] == [b"%d" % i for i in range(batches - 10, batches)]


def test_idle_clients_of_a_live_broker_stay_pooled_while_it_watches_them(broker):
    """The watch closes only clients whose brokers are gone: a producer and a consumer idle beside
    a running broker (their connections closed after CONNECTION_IDLE_MS) are still the ones the next
    tasks get."""
    from joinlab.spark_kafka.fetch import read_task
    from joinlab.spark_kafka.planning import OffsetRange, ReadTask
    from tests.conftest import wait_for
    create_topics(broker, ["in"])
    produce_batches(options(broker, "in"), [pa.RecordBatch.from_pydict({"value": [b"a"], "partition": [0]})])
    read = KafkaOptions.parse({"kafka.bootstrap.servers": broker, "subscribe": "in"})
    assert sum(b.num_rows for b in read_task(read, ReadTask((OffsetRange("in", 0, 0, 1),)))) == 1
    pooled = {k[0]: c for k, (c, _) in pool._idle.items()}
    assert sorted(pooled) == ["consumer", "producer"]
    rounds = pool.watch_rounds
    wait_for(lambda: pool.watch_rounds >= rounds + (2 * pool.CONNECTION_IDLE_MS / 1000 / pool.WATCH_S), 30,
             "the watch polling the idle clients past their idle connection close")
    assert {k[0]: c for k, (c, _) in pool._idle.items()} == pooled
