"""The lab's Spark: one Spark Connect server, and every entry point a client of it.

`session()` is the one way in. It gives a Spark Connect session on
1. $SPARK_REMOTE (PySpark's own variable, `sc://HOST:PORT`) with $SPARK_CONNECT_AUTHENTICATE_TOKEN:
   the Compose stack's server, or a test session's;
2. else the running native lab's server (`make up`), found through its state file;
3. else a server started in this process on a free port (`embedded`), which ends with it: `make
   demo` and a fresh `joinlab run` need no lab.
Every server has the same settings (`server_conf`): the RocksDB state store, the Kafka connector
(`connector_conf`, docs/kafka.md), the lab's logging, Python workers on the lab's interpreter.
A client sets runtime SQL settings only; the rest is the server's (docs/architecture.md).
"""
from __future__ import annotations

import importlib
import os
import re
import secrets
import socket
import sys
import threading
import time
import urllib.parse
import warnings
from pathlib import Path

import psutil

from joinlab import class_archive, jars, logs
from joinlab.broker import free_port
from joinlab.config import malloc_arenas, python_idle_timeout_s, shuffle_partitions
from joinlab.stack.procs import running_connect_server

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# RocksDB writes a small changelog per commit instead of uploading a snapshot of its files: a
# shorter commit per micro-batch (docs/benchmarks.md). Not fixed by a checkpoint. Row counting
# (Spark's default) stays on: the status line, the notebooks and `make soak` show state rows.
STATE_STORE_CONF = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
# RocksDB's memtables and block caches share one bound per JVM instead of taking up to their own
# for every partition of every stage (docs/operations.md#memory).
ROCKSDB_MEMORY_CONF = {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
                       "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "128"}
# Checkpoint files written through Hadoop's FileSystem API, not FileContext (Spark's default):
# the same files, in less time per commit (docs/benchmarks.md); not fixed by a checkpoint. It
# checks that a file is absent, then renames, so two runs on one checkpoint are still refused at
# their first clash, except within the instant between the check and the rename.
CHECKPOINT_FILES = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILES_CONF = {CHECKPOINT_FILES: "org.apache.spark.sql.execution.streaming.checkpointing."
                                           "FileSystemBasedCheckpointFileManager"}
# HotSpot never compiles a method of more than 8,000 bytes of bytecode: it stays interpreted. The
# code Spark generates for parsing (joinlab.kit.events) is such a method, so without this every record
# would be parsed by the interpreter (docs/benchmarks.md). And, for the lab's memory budget
# (docs/operations.md#memory): a heap that starts small, not at a 64th of the machine's memory,
# and the serial collector, whose heap grows only as far as the live data needs.
JVM_OPTIONS = "-XX:-DontCompileHugeMethods -Xms64m -XX:+UseSerialGC"
# On a cluster (the lab's stacks, whose memory budget counts every JVM), drivers and executors
# keep their heaps to 10-30% free after a full collection, not 40-70% (their old generations held
# 62-68 MiB of live data in 103-127 MiB). A local session, which runs the tasks in its driver,
# keeps the JVM's own ratios (docs/operations.md#memory).
CLUSTER_JVM_OPTIONS = "-XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
# A driver on a cluster plans each micro-batch and watches its tasks; the executors run them. Its
# JVM compiles with C1 only: no C2 compiler, whose working memory a driver kept (once up to
# 1 GiB of RSS for a heap of 512 MiB), no profiled code in its code cache (docs/operations.md#memory).
# That cache is reserved at 160 MiB, not C1's 48: it holds the code Spark generates for every query
# of every client, and a room's three participants running a notebook filled 48 MiB ("Out of space
# in CodeCache for adapters" failed a query); only what is used is resident.
CLUSTER_DRIVER_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:MaxNewSize=32m -XX:ReservedCodeCacheSize=160m"
# A UI store of the last 100 SQL executions, jobs and stages, not 1,000: a micro-batch is one of
# each, and a long-running driver's heap grew with them (docs/benchmarks.md).
UI_STORE_CONF = {"spark.sql.ui.retainedExecutions": "100", "spark.ui.retainedJobs": "100",
                 "spark.ui.retainedStages": "100"}


# A task's Python worker that neither reads nor writes the task's data for LAB_PYTHON_IDLE_TIMEOUT
# seconds is stuck: Spark kills it, and the task fails and is tried again, instead of waiting with
# its micro-batch forever. A transformWithState worker waits so when the JVM thread that answers its
# state calls has died (Spark's `TransformWithStateInPySparkStateServer`, an AssertionError: seen
# once in a whole test run, docs/failure-modes.md#a-stuck-python-worker). A local master tries a
# failed task once more (`with_task_retry`), as a cluster does (spark.task.maxFailures, 4).
def python_worker_conf() -> dict[str, str]:
    return {"spark.python.worker.idleTimeoutSeconds": str(python_idle_timeout_s()),
            "spark.python.worker.killOnIdleTimeout": "true"}


_LOCAL = re.compile(r"local(?:\[(\d+|\*)\])?")


def with_task_retry(master: str) -> str:
    """`master`, where it is local without a number of task attempts (`local`, `local[N]`,
    `local[*]`), as one that makes two (`local[N,2]`): Spark's local mode fails a query at its first
    failed task. A cluster's master, or a local one with its own attempts, is left as it is."""
    match = _LOCAL.fullmatch(master)
    return f"local[{match.group(1) or 1},2]" if match else master


def memory_conf() -> dict[str, str]:
    """Heaps within the lab's memory budget (docs/operations.md#memory), unless Spark's own
    variables say otherwise. The server's driver holds every query a client stopped, with that
    client's whole session, for an hour (Spark Connect's stopped-query cache, not configurable):
    about 3.3 MiB a query start (perf.connect_soak), so 1g, not the 512m a driver that only plans
    would need, holds a room's few hundred starts an hour. Executors get the lab's malloc arenas
    (joinlab.config.jvm_env)."""
    return {"spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "1g"),
            "spark.executor.memory": os.environ.get("SPARK_EXECUTOR_MEMORY", "512m"),
            "spark.executorEnv.MALLOC_ARENA_MAX": malloc_arenas(), **UI_STORE_CONF}


# Spark's classes from one archive (joinlab.class_archive) on a cluster only, where it is shared by
# the stack's JVMs and keeps the lab within its memory budget. A local server has no one to share
# it with (docs/benchmarks.md, perf.archive_local).
def driver_java_options(master: str) -> str:
    """The driver JVM's options: the lab's, and on a cluster its heap ratios, C1 only and Spark's
    classes from the archive the stack's JVMs share."""
    return jvm_options(*([] if master.startswith("local") else
                         [CLUSTER_JVM_OPTIONS, CLUSTER_DRIVER_OPTIONS, class_archive.java_options()]))


def executor_java_options() -> str:
    """An executor's (on a cluster only): the lab's, its heap ratios, the stack's shared class archive."""
    return jvm_options(CLUSTER_JVM_OPTIONS, class_archive.java_options())


def jvm_options(*more: str) -> str:
    """The options of every JVM of a server (its logging, JVM_OPTIONS), then `more`."""
    return " ".join(filter(None, [logs.java_options(), JVM_OPTIONS, *more]))


TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # what Spark's server and PySpark's client read
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
# A client that sends nothing for this long is gone (killed, or its kernel restarted): the server
# ends its session, and with it the session's streaming queries, so that no query runs on that no
# participant can see. A live client says it is there every HEARTBEAT_S (`_keep_alive`).
SESSION_TIMEOUT = "60s"
HEARTBEAT_S = 15.0
CONNECT_CONF = {"spark.connect.session.manager.defaultSessionTimeout": SESSION_TIMEOUT,
                "spark.connect.session.manager.maintenanceInterval": "10s",
                "spark.connect.grpc.port.maxRetries": "0",  # a taken port fails, it does not move
                # A query started on a checkpoint whose query still runs (its client was killed)
                # stops that run and takes over: never two runs on one checkpoint (Spark's default).
                "spark.sql.streaming.stopActiveRunOnRestart": "true"}


def sql_conf() -> dict[str, str]:
    """The SQL settings of every lab server, which a client also gives its own session on a server
    that is not the lab's (`equip`): transformWithState's state store (RocksDB, which it requires),
    its changelog, the checkpoint's file manager, the shuffle partitions, UTC."""
    return {"spark.sql.streaming.stateStore.providerClass": ROCKSDB,
            "spark.sql.shuffle.partitions": str(shuffle_partitions()),
            **STATE_STORE_CONF, **CHECKPOINT_FILES_CONF, "spark.sql.session.timeZone": "UTC"}


LAB_WORKERS = "joinlab.pyworkers"  # the lab's own servers fork Python workers from it: they have the lab


def server_conf(master: str, port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """Every setting of a lab server on `master`, listening on `host`:`port` (its token comes from
    its environment, TOKEN_VARIABLE, never its command line). Python workers run the lab's
    interpreter (`PYSPARK_PYTHON` in its environment), so they import the same packages."""
    bind = "127.0.0.1" if host == "127.0.0.1" else "0.0.0.0"
    driver_host = os.environ.get("LAB_DRIVER_HOST", "127.0.0.1")  # a container name in Compose
    return {"spark.master": with_task_retry(master), **sql_conf(), **ROCKSDB_MEMORY_CONF, **memory_conf(),
            "spark.ui.enabled": str(ui_enabled()).lower(),
            "spark.driver.bindAddress": "127.0.0.1" if driver_host == "127.0.0.1" else "0.0.0.0",
            "spark.driver.host": driver_host,
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.chunkBase64String.enabled": "false",
            "spark.python.daemon.module": LAB_WORKERS, **python_worker_conf(),
            "spark.driver.extraJavaOptions": driver_java_options(master),
            "spark.executor.extraJavaOptions": executor_java_options(),  # on a cluster only
            "spark.connect.grpc.binding.address": bind,
            "spark.connect.grpc.binding.port": str(port),
            **CONNECT_CONF, **connector_conf()}


def spark_master() -> str:
    """The master of a server this process starts: $SPARK_MASTER, else a local one with every core."""
    return os.environ.get("SPARK_MASTER") or "local[*]"


class ServerError(RuntimeError):
    """No lab server answers where one is expected; the message says what to check."""


_embedded: tuple[str, str] | None = None  # (url, token) of the server this process runs
# A process starts its own server once: PySpark's gateway to the stopped one's JVM is gone with it.
STOPPED = ("", "")
_embedded_server = None  # its session (the server side)
_client = None


def session(app_name: str = "stream-join-lab", **conf: str):
    """A Spark Connect session on the lab's server (see the module's docstring), with `conf`
    (runtime SQL settings; a static one is refused, not dropped). One per process: a second call
    returns the same session. `app_name` names a server this process starts."""
    global _client
    if _client is None or _client.is_stopped:
        url, token = server(app_name)
        _client = connect(url, token)
        equip(_client)
        _keep_alive(_client)
    for key, value in conf.items():
        _client.conf.set(key, value)
    return _client


def server(app_name: str = "stream-join-lab") -> tuple[str, str]:
    """(url, token) of the server this process's clients use: $SPARK_REMOTE's, the native lab's,
    else one started here."""
    if url := os.environ.get("SPARK_REMOTE"):
        in_url = re.search(r"(?i);token=([^;]*)", url)  # PySpark's own way: sc://HOST:PORT/;token=...
        return url, os.environ.get(TOKEN_VARIABLE) or (in_url.group(1) if in_url else "")
    return running_connect_server() or embedded(app_name)


# A call that finds no server is tried again for about 3 s, not PySpark's 10 minutes: the lab's
# server is on this machine or in the same Compose network, so silence means it is gone.
RETRIES = {"max_retries": 4, "initial_backoff": 50, "backoff_multiplier": 4.0, "max_backoff": 2000}


def connect(url: str, token: str):
    """A Connect session on `url` (sc://HOST:PORT) with `token`; ServerError in one line when
    nothing answers there, or the token is refused."""
    # gRPC's own lines (a failed TLS handshake, each retry's) and PySpark's warning that its retries
    # ran out say nothing the ServerError below does not say in one line.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
    from pyspark.errors import PySparkException
    _main_spec()
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    where = urllib.parse.urlparse(url)
    host, port = where.hostname, where.port or 15002
    url = re.sub(r"(?i)(token=)[^;]*", r"\1[hidden]", url)  # as the messages below show it
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        raise ServerError(f"no Spark Connect server at {url}: nothing answers there ({exc.strerror or exc}): "
                          "is the lab up (`make ps`), is the port right?") from None
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # PySpark's functions build Connect columns
    tls = "use_ssl=true" in where.path.lower()  # sc://HOST:PORT/;use_ssl=true, PySpark's own parameter
    client = ConnectSession.builder.channelBuilder(_channel(host, port, token, tls)).create()
    client.client.set_retry_policies([DefaultPolicy(**RETRIES)])
    try:
        client.conf.get("spark.sql.session.timeZone")  # the first call: is it a server, is the token right?
        server_version = client.version
    except PySparkException as exc:
        client.stop()  # not this process's active session any more
        if tls and re.search(r"(?i)ssl|handshake|certificate|UNAVAILABLE", str(exc)):  # and the port answered
            raise ServerError(f"no Spark Connect server at {url}: the TLS handshake failed: check that the server's "
                              "certificate names the URL's host and is signed by a CA this client trusts (the "
                              "system's, or the one $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names)") from None
        if "UNAUTHENTICATED" in str(exc):
            raise ServerError(f"no Spark Connect server at {url}: the server refused the token: check "
                              "$SPARK_CONNECT_AUTHENTICATE_TOKEN (`make up` writes the lab's to .env)") from None
        raise ServerError(f"no Spark Connect server at {url}: what answers there is not one, or failed: is the "
                          f"port right? ({' '.join(str(exc).split())[:200]})") from None
    if problem := version_problem(server_version):
        client.stop()
        raise ServerError(f"the Spark Connect server at {url} {problem}")
    return client


def no_connector() -> str:
    """What a server without Spark's Kafka connector needs, for this client's Spark version."""
    import pyspark
    return (f"start it with Spark's own (org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__} and its "
            f"dependencies: spark-submit's --packages, or their jars in --jars; docs/operations.md#your-own-spark)")


def version_problem(server_version: str, client_version: str | None = None) -> str | None:
    """Why a server of `server_version` cannot run the lab's jobs with this client (PySpark
    `client_version`), or None: the patterns' plans (transformWithState's) and the lab's Python
    workers are Spark 4.2's, and a Connect client talks to a server of its own feature release."""
    import pyspark
    client_version = client_version or pyspark.__version__
    if server_version.split(".")[:2] == client_version.split(".")[:2]:
        return None
    wanted = ".".join(client_version.split(".")[:2])
    return (f"runs Spark {server_version}, and the lab's client is PySpark {client_version}: run it on a "
            f"Spark {wanted}.x server (docs/operations.md#your-own-spark)")


def lab_server(client) -> bool:
    """Whether `client`'s server is one of the lab's (its Python workers fork from LAB_WORKERS, in
    the lab's environment, on a machine that shares this one's checkpoints)."""
    return client.conf.get("spark.python.daemon.module", "") == LAB_WORKERS


def equip(client) -> None:
    """Give a server that is not the lab's the lab's SQL settings (sql_conf) with this session, and
    its code with each query: the server has PySpark and Spark's Kafka connector and nothing of the
    lab (docs/operations.md#your-own-spark). Each query's Python functions and processors are
    pickled by value with everything of joinlab and the patterns' packages they use, so a Python
    worker there imports nothing of them. (Spark Connect's session artifacts, addArtifacts(pyfile=
    True), reach a batch query's workers but not a streaming query's in Spark 4.2: neither the
    driver's process that asks a transformWithState processor for its state, nor the executors'.)
    So code that runs on a worker imports what it needs at its module's top, never inside a
    function. The lab's own servers have the lab (their workers fork from LAB_WORKERS)."""
    if lab_server(client):
        return
    for key, value in sql_conf().items():
        client.conf.set(key, value)
    pickle_by_value()


def pickle_by_value() -> None:
    """Have cloudpickle send joinlab and the patterns' packages by value, with the postponed
    annotations of each of their modules loaded so far resolved (kit.solutions.resolve_annotations).
    For a server that is not the lab's (equip); again at each query's start (runner.start), for
    the modules imported since the session was made, as a notebook's second pattern is."""
    from pyspark import cloudpickle
    from joinlab import patterns
    from joinlab.kit.solutions import resolve_annotations
    packages = ("joinlab", *patterns.packages())
    for name in packages:
        cloudpickle.register_pickle_by_value(importlib.import_module(name))
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in packages and module is not None:
            resolve_annotations(module)


def _main_spec() -> None:
    """PySpark's Connect client reads `__main__.__spec__` when it is first imported, and IPython's
    `%reset` deletes that name from a kernel's `__main__` (its namespace): the import, and with it
    a notebook's session, would fail there with an AttributeError."""
    main = sys.modules.get("__main__")
    if main is not None and not hasattr(main, "__spec__"):
        main.__spec__ = None


def _channel(host: str, port: int, token: str, tls: bool = False):
    """gRPC to the server with the token: over TLS where asked (`;use_ssl=true` in the URL: a
    server elsewhere, behind a TLS proxy; PySpark's own channel, the certificate checked against
    the system's CAs or $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH); on this machine over a local channel
    (PySpark's own, for `localhost`); to another container (Compose's network) in plain text with
    the token's header, as PySpark's client sends it (it wants TLS for any other host). No token:
    none at all, not even $SPARK_CONNECT_AUTHENTICATE_TOKEN (`make up` checks that the server
    refuses that)."""
    import grpc
    from pyspark.sql.connect.client import DefaultChannelBuilder
    if tls:
        return DefaultChannelBuilder(f"sc://{host}:{port}/;use_ssl=true" + (f";token={token}" if token else ""))
    if token and host in ("localhost", "127.0.0.1"):
        return DefaultChannelBuilder(f"sc://localhost:{port}/;token={token}")

    class Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
        """Every call with `Authorization: Bearer TOKEN` (Connect's calls are unary or server-streaming)."""

        def _call(self, continuation, details, request):
            metadata = list(details.metadata or []) + [("authorization", f"Bearer {token}")]
            return continuation(details._replace(metadata=metadata), request)
        intercept_unary_unary = intercept_unary_stream = _call

    class PlainWithToken(DefaultChannelBuilder):
        def toChannel(self):
            channel = self._insecure_channel(self.endpoint)
            return grpc.intercept_channel(channel, Bearer()) if token else channel
    return PlainWithToken(f"sc://{host}:{port}")


def _keep_alive(client) -> None:
    """Tell the server every HEARTBEAT_S that this client is there (SESSION_TIMEOUT), from a daemon
    thread: it ends with the process, and then the server ends the session and its queries."""
    def beat():
        while True:
            time.sleep(HEARTBEAT_S)
            if client.is_stopped:
                return
            try:
                client.conf.get("spark.sql.session.timeZone")
            except Exception:  # the server is gone: the caller's next call says so
                return
    threading.Thread(target=beat, name="connect-heartbeat", daemon=True).start()


def embedded(app_name: str = "stream-join-lab") -> tuple[str, str]:
    """Start a Connect server in this process (its JVM is this process's child and ends with it)
    on a free port of 127.0.0.1, with a new token: (url, token)."""
    global _embedded
    if _embedded == STOPPED:
        raise ServerError("this process's own Spark server was stopped (joinlab.spark.stop: lab.stop() in a "
                          "notebook), and a process starts one only once: start a new process (in a notebook, "
                          "restart its kernel), or `make up` and use the lab's server")
    if _embedded is None:
        from pyspark.sql import SparkSession as ServerSession
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # inherited from a client parent
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        master, port, token = spark_master(), free_port(), secrets.token_hex(16)
        if not master.startswith("local"):
            # A driver on a cluster (started below by spark-submit, from this environment): the
            # lab's malloc arenas. A local one keeps glibc's own, as its heap ratios stay the JVM's.
            os.environ.setdefault("MALLOC_ARENA_MAX", malloc_arenas())
        conf = {**server_conf(master, port), "spark.plugins": CONNECT_PLUGIN, "spark.app.name": app_name}
        os.environ[TOKEN_VARIABLE] = token  # the server reads it from its environment: not on its command line
        global _embedded_server
        with logs.filter_stderr():
            _embedded_server = ServerSession.builder.config(map=conf).getOrCreate()
        _embedded = (f"sc://localhost:{port}", token)
    return _embedded


def stop(spark) -> None:
    """End this client's session on the server (its queries stop with it); the server runs on,
    unless it is this process's own: that one ends too, its JVM with it, before the caller stops the
    broker (its Kafka producers would warn of the lost broker until the process exits)."""
    global _client, _embedded, _embedded_server
    spark.stop()
    if spark is _client:
        _client = None
        if _embedded_server is not None:
            _embedded_server.stop()
            for jvm in server_jvms():
                jvm.terminate()
                jvm.wait(timeout=30)
            _embedded_server, _embedded = None, STOPPED


def server_jvms() -> list[psutil.Process]:
    """The JVM of the server this process runs (PySpark starts it as a child through spark-submit);
    not any other java child, such as an embedded broker."""
    return [p for p in psutil.Process().children() if "org.apache.spark.deploy.SparkSubmit" in " ".join(p.cmdline())]


def executors(spark) -> int | None:
    """The server's executors now, its driver not counted (from its web UI's REST API); None on a
    local server (the driver runs the tasks there, so there is no executor to lose) or without a UI."""
    import json
    import urllib.request
    ui = ui_url(spark)
    if not ui or spark.conf.get("spark.master", "local").startswith("local"):
        return None
    try:
        with urllib.request.urlopen(f"{ui}/api/v1/applications", timeout=2) as answer:
            app = json.load(answer)[0]["id"]
        with urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/executors", timeout=2) as answer:
            return sum(1 for e in json.load(answer) if e.get("id") != "driver")
    except (OSError, ValueError, IndexError, KeyError):
        return None


def ui_url(spark) -> str | None:
    """The server's Spark web UI (every client's queries are there), None when it runs none."""
    if spark.conf.get("spark.ui.enabled", "true") != "true":
        return None
    host = spark.conf.get("spark.driver.host", "127.0.0.1")
    return f"http://{host}:{spark.conf.get('spark.ui.port', '4040')}"


def ui_enabled() -> bool:
    """Whether a server runs its web UI: $LAB_SPARK_UI, on unless false (tests/conftest sets it)."""
    return os.environ.get("LAB_SPARK_UI", "true").strip().lower() not in ("false", "0", "no", "off")


def connector_conf() -> dict[str, str]:
    """The session settings that put Spark's Kafka connector on its classpath (none where it is
    already in PySpark's jars folder); JarsError naming `make install` when it is nowhere."""
    import pyspark
    if any(Path(pyspark.__file__).parent.joinpath("jars").glob("spark-sql-kafka-0-10_*.jar")):
        return {}
    if os.environ.get("LAB_SPARK_PACKAGES", "").strip().lower() in ("1", "true", "yes", "on"):
        return {"spark.jars.packages": jars.connector_coordinates()[0]}
    return {"spark.jars": ",".join(map(str, jars.jars(jars.connector_bundle())))}
