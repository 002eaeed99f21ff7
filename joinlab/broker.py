"""The embedded broker: Apache Kafka as one local KRaft node (broker and controller in one JVM),
run from the jars `make install` fetched (joinlab.jars): `EmbeddedBroker` for a `with` block, and
the background broker `joinlab broker start` leaves running. Its data, readiness and retention:
docs/kafka.md#the-embedded-broker.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import closing, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from joinlab import jars
from joinlab.config import java, jvm_env, lab_home

HOST = "127.0.0.1"
# A disk budget per partition, whatever the rate or the hours a generator runs (docs/kafka.md).
RETENTION = {"log.retention.bytes": str(128 << 20), "log.segment.bytes": str(32 << 20),
             "log.retention.hours": "24", "log.retention.check.interval.ms": "60000"}
# Within the lab's memory budget (docs/operations.md#memory); $KAFKA_HEAP_OPTS overrides it, as for
# Kafka's own scripts. The serial collector: a heap this small, at the lab's rates, needs no more.
HEAP = "-Xms64m -Xmx128m"
# The log cleaner's buffer of keys for compacted topics (Kafka's own, __consumer_offsets; the lab's
# topics are not compacted): 16 MiB, not Kafka's 128 MiB, which it allocates on the heap at start
# (it was most of a 256 MiB heap; with a 128 MiB heap the broker fails to start with it).
MEMORY = {"log.cleaner.dedupe.buffer.size": str(16 << 20)}
READY_TIMEOUT_S = 60.0


class BrokerError(RuntimeError):
    """The embedded broker could not be started, found or stopped; the message says what to do."""


@dataclass
class BrokerInfo:
    pid: int
    port: int
    controller_port: int
    cluster_id: str
    log_path: str
    data_dir: str
    version: str = jars.KAFKA_VERSION

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def answers_as(bootstrap: str, cluster_id: str | None, timeout_s: float = 2.0, plain: bool = False) -> bool:
    """True when a metadata request to `bootstrap` succeeds (and reports `cluster_id`, if given),
    with the lab's Kafka settings (joinlab.kafka_settings), or without them (`plain`: the embedded
    broker's own PLAINTEXT listener)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError, KafkaError
    from joinlab.kafka_settings import client_config
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    settings = {} if plain else client_config()  # a setting the lab refuses is said, not taken for no broker
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
        with closing(KafkaAdminClient(**settings, bootstrap_servers=bootstrap,
                                      request_timeout_ms=int(timeout_s * 1000),
                                      bootstrap_timeout_ms=int(timeout_s * 1000))) as admin:
            return cluster_id is None or admin.describe_cluster().get("cluster_id") == cluster_id
    except KafkaConfigurationError:  # a mistake in the settings, not a broker that does not answer
        raise
    except (KafkaError, OSError, ValueError):  # ValueError: an address without a port number
        return False


def _java(data_dir: Path) -> list[str]:
    """The start of every command the broker runs: java, with the log settings and Kafka's jars."""
    found = java()
    if found is None:
        raise BrokerError("No Java to run Kafka: install Java 17+ (make check-java says how), or set "
                          "KAFKA_BOOTSTRAP_SERVERS to a running Kafka.")
    try:
        classpath = os.pathsep.join(map(str, jars.jars(jars.kafka_bundle())))
    except jars.JarsError as exc:
        raise BrokerError(f"{exc} Or set KAFKA_BOOTSTRAP_SERVERS to a running Kafka.") from exc
    return [str(found), f"-Dlog4j2.configurationFile={data_dir / 'log4j2.properties'}", "-cp", classpath]


# Broker settings that add to the lab's own rather than replace them (EmbeddedBroker's `settings`).
LISTS = ("listeners", "advertised.listeners", "listener.security.protocol.map")


def _properties(data_dir: Path, port: int, controller_port: int, extra: dict[str, str] | None = None) -> str:
    settings = {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir / "data"),
        # One node: every internal topic has one replica.
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        **RETENTION,
        **MEMORY,
    }
    for key, value in (extra or {}).items():
        settings[key] = f"{settings[key]},{value}" if key in LISTS else value
    escaped = lambda value: str(value).replace("\\", "\\\\").replace("\n", "\\n")  # noqa: E731 (Java properties)
    return "".join(f"{key}={escaped(value)}\n" for key, value in settings.items())


# The broker's own lines at WARN and above, and the line that says it started.
LOG4J = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def _launch(data_dir: Path, port: int, controller_port: int, log_path: Path,
            detach: bool, settings: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "server.properties"
    config.write_text(_properties(data_dir, port, controller_port, settings))
    config.chmod(0o600)  # it may hold a listener's key
    (data_dir / "log4j2.properties").write_text(LOG4J)
    base = _java(data_dir)
    meta = data_dir / "data" / "meta.properties"  # where a formatted log directory names its cluster
    found = re.search(r"^cluster\.id=(.*)$", meta.read_text(), re.M) if meta.is_file() else None
    if found:
        cluster_id = found.group(1).strip()
    else:  # a new log directory: format it for a new cluster
        cluster_id = "-"
        while cluster_id.startswith("-"):  # the tool would read a leading "-" as an option (as Kafka's own ids avoid)
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        done = subprocess.run([*base, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise BrokerError(f"Kafka could not format its log directory {data_dir}: "
                              + (done.stderr.strip() or done.stdout.strip())[-600:])
    with open(log_path, "ab") as log:
        heap = os.environ.get("KAFKA_HEAP_OPTS", HEAP).split()
        proc = subprocess.Popen([*base, *heap, "-XX:+UseSerialGC", "-Djava.awt.headless=true", "kafka.Kafka", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detach,
                                env=jvm_env())
    return proc, cluster_id


def start_broker(port: int | None = None, log_path: Path | None = None, detach: bool = False,
                 data_dir: Path | None = None, controller_port: int | None = None,
                 settings: dict[str, str] | None = None) -> tuple[subprocess.Popen, BrokerInfo]:
    """Start Kafka on `port` (or a free one, tried three times: another process may take it between
    choosing and binding) with its log directory in `data_dir` (formatted if new, else continued),
    and wait until it answers with its cluster id (on its PLAINTEXT listener). `settings` go into
    its server.properties over the lab's; those in LISTS are added to the lab's (a listener more)."""
    log_path = Path(log_path or lab_home() / "broker.log")
    data_dir = Path(data_dir or tempfile.mkdtemp(prefix="kafka-", dir=lab_home()))
    last_problem = ""
    for _ in range(3 if port is None else 1):
        chosen, chosen_controller = port or free_port(), controller_port or free_port()
        proc, cluster_id = _launch(data_dir, chosen, chosen_controller, log_path, detach, settings)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_problem = (f"it exited with code {proc.returncode} (port {chosen} or {chosen_controller} taken?)")
                break
            if answers_as(f"{HOST}:{chosen}", cluster_id, timeout_s=1.0, plain=True):
                return proc, BrokerInfo(proc.pid, chosen, chosen_controller, cluster_id, str(log_path), str(data_dir))
            time.sleep(0.1)
        else:
            stop_process(proc.pid)
            last_problem = f"it did not answer within {READY_TIMEOUT_S:.0f}s"
    raise BrokerError(f"The embedded Kafka broker did not start: {last_problem}. See its log: {log_path}"
                      + (f". Choose another port than {port}." if port else ""))


def stop_process(pid: int, grace_s: float = 20.0) -> None:
    """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `grace_s`; returns once it is gone
    (reaped, if it is our own child)."""
    with suppress(psutil.NoSuchProcess):
        process = psutil.Process(pid)
        process.terminate()
        try:
            process.wait(grace_s)
        except psutil.TimeoutExpired:
            process.kill()
            process.wait(10)  # psutil.TimeoutExpired only if SIGKILL could not end it


class EmbeddedBroker:
    """A broker for the lifetime of a `with` block (`make demo`, `make soak`, tests), its log
    directory a temporary folder removed afterwards unless `data_dir` is given (then a later
    broker on the same folder continues it). `settings`: broker properties over the lab's, e.g. a
    listener more (start_broker)."""

    def __init__(self, port: int | None = None, log_path: Path | None = None, data_dir: Path | None = None,
                 settings: dict[str, str] | None = None):
        self._port, self._log_path, self._data_dir, self._settings = port, log_path, data_dir, settings
        self.info: BrokerInfo | None = None

    def __enter__(self) -> "EmbeddedBroker":
        self._proc, self.info = start_broker(self._port, self._log_path, data_dir=self._data_dir,
                                             settings=self._settings)
        return self

    @property
    def bootstrap_servers(self) -> str:
        return self.info.bootstrap_servers

    @property
    def pid(self) -> int:
        return self.info.pid

    def __exit__(self, *exc) -> None:
        stop_process(self._proc.pid)
        self._proc.wait(timeout=30)
        if self._data_dir is None:
            shutil.rmtree(self.info.data_dir, ignore_errors=True)


# --- The background broker that `joinlab broker start` leaves running -----------------------

PORTS = "ports.json"  # in the log directory: the ports its broker listened on last


def _state_file() -> Path:
    return lab_home() / "broker.json"


def _saved() -> BrokerInfo | None:
    try:
        return BrokerInfo(**json.loads(_state_file().read_text()))
    except (OSError, TypeError, ValueError):  # none, or a state file of another broker: nothing of it runs now
        return None


def running_broker() -> BrokerInfo | None:
    """The background broker, if its state file names a live process that still answers."""
    info = _saved()
    if info and psutil.pid_exists(info.pid) and answers_as(info.bootstrap_servers, info.cluster_id, plain=True):
        return info
    return None


def bindable(port: int) -> bool:
    """Whether a server could listen on `port` now (SO_REUSEADDR, as servers do: a connection of a
    stopped server in TIME_WAIT does not own the port)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def start_background(port: int | None = None) -> BrokerInfo:
    """Start (or find) the background broker on $LAB_HOME/kafka, on the ports it had last time
    where they are free, so that a restart keeps its address as well as its records."""
    if info := running_broker():
        return info
    data_dir = lab_home() / "kafka"
    last = json.loads((data_dir / PORTS).read_text()) if (data_dir / PORTS).is_file() else {}
    free_last = {key: number for key, number in last.items() if bindable(number)}
    _, info = start_broker(port or free_last.get("port"), detach=True, data_dir=data_dir,
                           controller_port=free_last.get("controller_port"))
    (data_dir / PORTS).write_text(json.dumps({"port": info.port, "controller_port": info.controller_port}))
    _state_file().write_text(json.dumps(asdict(info)))
    return info


def stop_background() -> BrokerInfo | None:
    """Stop the background broker (its log directory stays, and remembers its ports)."""
    if info := _saved():
        stop_process(info.pid)
        _state_file().unlink()
    return info


def bootstrap_servers() -> str:
    """The Kafka settings' bootstrap.servers ($KAFKA_BOOTSTRAP_SERVERS, or the file $LAB_KAFKA_PROPERTIES
    names: joinlab.kafka_settings), else the background embedded broker; a clear error otherwise."""
    from joinlab.kafka_settings import settings
    if configured := settings().bootstrap:
        return configured
    if info := running_broker():
        return info.bootstrap_servers
    raise BrokerError("No Kafka broker: run `make broker-start` (embedded broker) "
                      "or set KAFKA_BOOTSTRAP_SERVERS=host:port (or bootstrap.servers in $LAB_KAFKA_PROPERTIES's file).")
