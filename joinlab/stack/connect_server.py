"""`python -m joinlab.stack.connect_server`: the lab's Spark Connect server in the foreground, as the
Compose stack's `spark-connect` service runs it (docker-compose.yml); with `--check`, its health check.

The command is the native stack's (joinlab.stack.services.connect_command): the same settings, on
$SPARK_MASTER, for clients on HOST:PORT. HOST is 0.0.0.0 by default, so the other containers reach
it by its service name ($LAB_DRIVER_HOST, which executors connect back to as well); Compose
publishes the port on 127.0.0.1 only. The token is $SPARK_CONNECT_AUTHENTICATE_TOKEN, required: a
server without one runs the code of anyone who reaches it.
"""
from __future__ import annotations

import argparse
import os
import sys

from joinlab.config import jvm_env
from joinlab.spark import TOKEN_VARIABLE, spark_master
from joinlab.stack.procs import StackError
from joinlab.stack.services import connect_answers, connect_command


def server_env() -> dict[str, str]:
    """This environment (the token in it) for the server's JVM: the lab's malloc arenas, Python
    workers on this interpreter unless $PYSPARK_PYTHON names one (the image's does)."""
    env = jvm_env()
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joinlab.stack.connect_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="0.0.0.0", help="where clients connect (default: every interface)")
    parser.add_argument("--port", type=int, default=15002, help="the Connect port (default 15002)")
    parser.add_argument("--ui-port", type=int, default=4040, help="the server's Spark web UI (default 4040)")
    parser.add_argument("--check", action="store_true",
                        help="exit 0 when the server on localhost:PORT answers with the token and refuses without it")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token:
        print(f"connect_server: ${TOKEN_VARIABLE} is empty; the lab's server always requires a token "
              "(set it in .env: `make up` generates one)", file=sys.stderr)
        return 2
    if args.check:
        try:
            return 0 if connect_answers(f"sc://localhost:{args.port}", token) else 1
        except StackError as exc:
            print(f"connect_server: {exc}", file=sys.stderr)
            return 1
    cmd = connect_command(spark_master(), args.port, args.ui_port, args.host)
    print(f"connect_server: Spark Connect on {spark_master()}, clients on {args.host}:{args.port}, "
          f"web UI on port {args.ui_port}", flush=True)
    os.execve(cmd[0], cmd, server_env())
    return 1  # not reached: the server replaces this process


if __name__ == "__main__":
    sys.exit(main())
