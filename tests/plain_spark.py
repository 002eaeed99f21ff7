"""A Spark Connect server that is not the lab's, as a user's own would be: PySpark with its
`connect` extra (pandas, pyarrow, grpcio, protobuf) in a virtualenv of its own, Spark's Kafka
connector jars in --jars (or none), started with Spark's own class and no setting of the lab, from
an empty folder, as `nobody`: a Unix user that cannot read the test's folders (pytest's are 0700)
and has nothing of the lab to import. The virtualenv is made once per machine and kept
($LAB_PLAIN_SPARK_VENV, default /opt/stream-join-lab/plain-spark; pip takes about 20 s with its
cache, a few minutes without; another release's, for a server of another version, beside it)."""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyspark

from joinlab import jars
from joinlab.broker import free_port
from joinlab.config import java
from joinlab.room.venv import interpreter
from joinlab.stack import procs

USER = "nobody"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def venv(version: str = pyspark.__version__) -> Path:
    """The server's virtualenv: PySpark `version` (the client's, unless said), nothing of the lab."""
    where = Path(os.environ.get("LAB_PLAIN_SPARK_VENV", "/opt/stream-join-lab/plain-spark"))
    if version != pyspark.__version__:
        where = where.with_name(f"{where.name}-{version}")
    wanted = f"pyspark[connect]=={version}"
    stamp = where / ".installed"
    if stamp.is_file() and stamp.read_text() == wanted:
        return where
    shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    subprocess.run([interpreter(), "-m", "venv", str(where)], check=True, timeout=300)
    subprocess.run([str(where / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", wanted],
                   check=True, timeout=1200)
    subprocess.run(["chmod", "-R", "a+rX", str(where)], check=True)
    stamp.write_text(wanted)
    return where


@dataclass
class PlainServer:
    url: str
    port: int
    token: str
    folder: Path      # the server's own: its log, its jars, the checkpoints it writes
    process: subprocess.Popen

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def checkpoints(self) -> str:
        """Where its queries keep their checkpoints: a URI, so the client leaves them to the server."""
        return f"file://{self.folder / 'checkpoints'}"

    def client_env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` for a `joinlab` process that is a client of this server."""
        return {**base, "SPARK_REMOTE": self.url, "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.token,
                "LAB_CHECKPOINTS": self.checkpoints}

    def stop(self) -> None:
        _stop(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (spark-submit's JVM, its Python workers), SIGKILL after 30 s."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass


def start(with_connector: bool = True, version: str = pyspark.__version__,
          ready_timeout_s: float = 120.0) -> PlainServer:
    """Start a plain server on a free port of 127.0.0.1, its token in its environment only."""
    python = venv(version)
    folder = Path(tempfile.mkdtemp(prefix="plain-spark-"))
    os.chmod(folder, 0o755)
    jar_paths = []
    if with_connector:
        (folder / "jars").mkdir()
        for jar in jars.jars(jars.connector_bundle()):
            shutil.copy(jar, folder / "jars" / jar.name)
            jar_paths.append(str(folder / "jars" / jar.name))
    shutil.chown(folder, USER)
    port, token = free_port(), secrets.token_hex(16)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": str(python / "bin" / "python"), "SPARK_CONNECT_AUTHENTICATE_TOKEN": token}
    if found := java():
        env["JAVA_HOME"] = str(found.parent.parent)
    cmd = [str(python / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--master", "local[2]",
           "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false", *(["--jars", ",".join(jar_paths)] if jar_paths else [])]
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, preexec_fn=procs.as_user(USER), start_new_session=True)
    server = PlainServer(f"sc://127.0.0.1:{port}", port, token, folder, process)
    _wait_listening(server, port, ready_timeout_s)
    return server


def _wait_listening(server: PlainServer, port: int, timeout_s: float) -> None:
    """Until its log says it listens (or it exits, or `timeout_s` passes: then stopped, its log raised)."""
    deadline = time.monotonic() + timeout_s
    while "Spark Connect server started" not in server.log.read_text(errors="replace"):
        if server.process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the plain Spark server did not start: {server.log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


class TlsProxy:
    """TLS in front of a server, as one elsewhere would have it (Spark Connect's gRPC is plain
    text): it ends TLS (ALPN h2, as gRPC asks) with the certificate and key in `cert_file` and
    `key_file` (PEM) and forwards each connection's bytes to 127.0.0.1:`target`."""

    def __init__(self, target: int, cert_file: Path, key_file: Path):
        import ssl
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert_file, key_file)
        self.context.set_alpn_protocols(["h2"])
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(conn, server_side=True)
        except OSError:  # a client that does not trust the certificate ends the handshake
            conn.close()
            return
        upstream = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from `source` to `sink` until either ends; then both closed."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.close()
