"""The server side of the test session's Spark: conftest's `spark` fixture starts the Spark Connect
server in the pytest process (joinlab.spark.embedded), a classic SparkSession whose JVM is a child
of this process. A Connect client has no JVM of its own (no `_jvm`, no `sparkContext`): the tests
that ask the server's JVM itself (its live log4j configuration, its checkpoint file manager, its
Kafka producers, its class path) ask it here."""
from __future__ import annotations

import os

import psutil


def server_session():
    """The classic SparkSession of the server this process runs (call it after the `spark` fixture)."""
    from joinlab import spark as lab_spark
    server = lab_spark._embedded_server
    assert server is not None, ("the test session's Spark Connect server does not run in this process "
                                "($SPARK_REMOTE was set before the tests started?)")
    return server


def server_jvm() -> psutil.Process:
    """The server's JVM: the java child of this process that PySpark started through spark-submit
    (the session's embedded broker is a java child too)."""
    from joinlab.spark import server_jvms
    server_session()
    found = server_jvms()
    assert len(found) == 1, f"one Spark server JVM among this process's children: {found}"
    return found[0]


def own_server_env() -> dict[str, str]:
    """This process's environment without the test session's server ($SPARK_REMOTE, its token, and
    PySpark's mark of a client process): a program started with it starts a server or a classic
    session of its own."""
    from joinlab.spark import TOKEN_VARIABLE
    client_only = ("SPARK_REMOTE", TOKEN_VARIABLE, "SPARK_CONNECT_MODE_ENABLED")  # the last: PySpark's, set by a client
    return {k: v for k, v in os.environ.items() if k not in client_only}
