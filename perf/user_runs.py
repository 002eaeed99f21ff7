"""What a user gets: tweet views through `joinlab run --json` in a fresh process, as a workshop, a
notebook user or the grader starts it, for one or more lab checkouts in alternation (before and
after a change), and beside them the same job with a JVM processor, the yardstick in
../shared/peers/spark_jvm_tweet_views, when its jar is built.

    python -m perf.user_runs --lab ../before --lab . --rounds 3
    python -m perf.user_runs --lab . --in-lab .lab     # and as a client of the native lab running there
    python -m perf.user_runs --lab . --plain-spark     # and of a Spark Connect server without the lab

Per phase one embedded broker and one set of seeded events; every run reads them from the start
with a fresh checkpoint and the output topics emptied, and is verified with `joinlab verify
tweet-views`. A run starts its own Spark (`SPARK_MASTER=local[2]`), or with `--in-lab` also as a
client of a running native lab's Spark Connect server (`make up`; its master and worker), or with
`--plain-spark` as a client of a server that is not the lab's (tests/plain_spark.py: PySpark and the
connector, as the user nobody, local[2]; its checkpoints on its side). Per run: the seconds from the command's start to its first
status line, its first batch, the median batch after the first (tiny phase) and the rate over the
batches of >= 10,000 records after the first (steady phase).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEER = Path(__file__).resolve().parents[2] / "shared" / "peers" / "spark_jvm_tweet_views"


def peer_jar(folder: Path) -> Path:
    return folder / "target" / "spark-jvm-tweet-views.jar"


def summary(lines: list[tuple[float, dict]]) -> dict:
    """(seconds after the start, status line as JSON) of one run -> its figures."""
    if not lines:
        return {"first_line_s": None}
    later = [status for _, status in lines[1:]]
    steady = [s for s in later if sum(s["records_in"].values()) >= 10_000]
    records = sum(sum(s["records_in"].values()) for s in steady)
    seconds = sum(s["duration_s"] for s in steady)
    return {"first_line_s": round(lines[0][0], 1), "first_batch_s": lines[0][1]["duration_s"],
            "median_batch_ms": round(statistics.median(s["duration_s"] for s in later) * 1000) if later else None,
            "steady_rate": round(records / seconds) if seconds else None, "batches": len(lines)}


def run(command: list[str], cwd: Path, env: dict) -> tuple[list[tuple[float, dict]], int]:
    """Run `command`; every JSON status line it prints with the seconds since the start."""
    start = time.monotonic()
    lines = []
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as process:
        for line in process.stdout:
            status = json.loads(line) if line.startswith("{") else {}
            if "batch" in status:
                lines.append((time.monotonic() - start, status))
    return lines, process.returncode


def lab_command(lab: Path, per_trigger: int, checkpoint: str, solution: Path | None = None) -> list[str]:
    """A run on a new checkpoint (--reset where it is this machine's: one a plain server keeps is
    new already, and the lab deletes nothing there)."""
    return [str(lab / ".venv/bin/joinlab"), "run", "tweet-views", "--available-now",
            *([] if "://" in checkpoint else ["--reset"]),
            "--max-offsets-per-trigger", str(per_trigger), "--json", "--checkpoint", checkpoint,
            *(["--solution", str(solution)] if solution else [])]


def peer_command(jar: Path, per_trigger: int, checkpoint: str, bootstrap: str) -> list[str]:
    """The JVM job, with the lab's session settings and connector jars (as the peer's run.sh)."""
    import pyspark
    from joinlab import config, jars, logs
    from joinlab import spark as lab_spark
    conf = {"spark.sql.streaming.stateStore.providerClass": lab_spark.ROCKSDB,
            "spark.sql.shuffle.partitions": str(config.shuffle_partitions()),
            **lab_spark.STATE_STORE_CONF, **lab_spark.CHECKPOINT_FILES_CONF, **lab_spark.ROCKSDB_MEMORY_CONF,
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
            "spark.ui.showConsoleProgress": "false", "spark.sql.chunkBase64String.enabled": "false",
            "spark.driver.extraJavaOptions": f"{logs.java_options()} {lab_spark.JVM_OPTIONS}"}
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    connector = ",".join(map(str, jars.jars(jars.connector_bundle())))
    return [str(submit), "--master", "local[2]", "--jars", connector,
            *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
            "--class", "peers.sparkjvm.TweetViewsJob", str(jar), "--bootstrap", bootstrap,
            "--checkpoint", checkpoint, "--max-offsets-per-trigger", str(per_trigger), "--parse", "variant"]


def empty_outputs(bootstrap: str) -> None:
    """Delete tweet views' output topics and create them again, empty."""
    from joinlab import patterns
    from joinlab.topics import create_topics, delete_topics
    delete_topics(bootstrap, ["tweet-views", "tweet-views-dlq"])
    for _ in range(50):
        try:
            return create_topics(bootstrap, patterns.all_topics("tweet-views"))
        except Exception:  # the broker may still be finishing the deletion
            time.sleep(0.5)


def phase(name: str, labs: list[Path], peer: Path | None, rounds: int, events: int, users: int | None,
          per_trigger: int, seed: int, solutions: list[Path] = (), in_lab: dict | None = None,
          plain=None) -> list[dict]:
    from joinlab.broker import EmbeddedBroker
    from joinlab.patterns import generator
    rows = []
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as work:
        bootstrap = broker.bootstrap_servers
        args = ["--count", str(events), "--seed", str(seed), "--bootstrap", bootstrap, "--no-progress"]
        with contextlib.redirect_stdout(sys.stderr):  # its summary line is progress, not a result
            generator("tweet-views").main(args + (["--users", str(users)] if users else []))
        env = {**os.environ, "SPARK_MASTER": "local[2]", "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": work}
        engines = ([("lab", lab, None) for lab in labs] + [(f"lab+{s.stem}", labs[-1], s) for s in solutions]
                   + ([("lab, in a running lab", labs[-1], None)] if in_lab else [])
                   + ([("lab, on a plain server", labs[-1], None)] if plain else [])
                   + ([("jvm peer", labs[-1], None)] if peer else []))
        for number in range(rounds):
            for engine, lab, solution in engines:
                empty_outputs(bootstrap)
                # a new one per run: a plain server's outlive the phase (and its broker)
                checkpoint = (f"{plain.checkpoints}/{name}-{len(rows)}" if engine == "lab, on a plain server"
                              else f"{work}/checkpoint-{len(rows)}")
                command = (peer_command(peer, per_trigger, checkpoint, bootstrap) if engine == "jvm peer"
                           else lab_command(lab, per_trigger, checkpoint, solution))
                lab_env = {"LAB_JARS": str(lab / ".lab" / "jars"), **env}  # LAB_HOME is the phase's own
                if engine == "lab, in a running lab":
                    lab_env.update(in_lab)
                if engine == "lab, on a plain server":
                    lab_env = plain.client_env(lab_env)
                lines, code = run(command, lab, lab_env)
                checked = subprocess.run([str(lab / ".venv/bin/joinlab"), "verify", "tweet-views"], cwd=lab,
                                         env=lab_env, capture_output=True, text=True)
                verified = checked.returncode == 0
                if not verified:
                    print(checked.stdout + checked.stderr, file=sys.stderr)
                row = {"phase": name, "engine": engine, "lab": str(lab), "round": number + 1, "exit": code,
                       "verified": verified, "load": os.getloadavg()[0], **summary(lines)}
                if engine == "jvm peer":
                    row["first_line_s"] = None  # the peer prints its lines when its query ends
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.user_runs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", action="append", type=Path, help="a lab checkout after make install (repeat)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tiny-events", type=int, default=1200, help="tiny phase: events, 100 a trigger")
    parser.add_argument("--steady-events", type=int, default=100_000, help="steady phase: events, 20,000 a trigger")
    parser.add_argument("--peer", type=Path, default=PEER, help="the JVM peer's folder (its jar built by mvn package)")
    parser.add_argument("--in-lab", type=Path, metavar="LAB_HOME",
                        help="also run the last lab as a client of the native lab running with this LAB_HOME")
    parser.add_argument("--plain-spark", action="store_true",
                        help="also run the last lab as a client of a Spark Connect server without the lab")
    parser.add_argument("--solution", action="append", type=Path, default=[],
                        help="also run the last lab with this file's processor (repeat), e.g. a study's")
    args = parser.parse_args(argv)
    plain = None
    if args.plain_spark:
        from tests import plain_spark
        plain = plain_spark.start()
    try:
        rows = measure([lab.resolve() for lab in args.lab or [Path(".")]], args.peer, args.rounds, args.tiny_events,
                       args.steady_events, [s.resolve() for s in args.solution], args.in_lab and lab_server(args.in_lab),
                       plain)
    finally:
        if plain:
            plain.stop()
    print(format_rows(rows))
    return 0 if all(row["exit"] == 0 and row["verified"] for row in rows) else 1


def lab_server(home: Path) -> dict:
    """The environment of a client of the native lab's Connect server running with LAB_HOME `home`."""
    os.environ["LAB_HOME"] = str(home.resolve())
    from joinlab.spark import TOKEN_VARIABLE
    from joinlab.stack.procs import running_connect_server
    found = running_connect_server()
    if found is None:
        raise SystemExit(f"no native lab's Spark Connect server runs with LAB_HOME={home}: start one with `make up`")
    return {"SPARK_REMOTE": found[0], TOKEN_VARIABLE: found[1]}


def measure(labs: list[Path], peer_folder: Path, rounds: int, tiny_events: int, steady_events: int,
            solutions: list[Path] = (), in_lab: dict | None = None, plain=None) -> list[dict]:
    """Every run of both phases; the peer's too when its jar is built (else a line says it is not)."""
    peer = peer_jar(peer_folder) if peer_jar(peer_folder).is_file() else None
    if peer is None:
        print(f"jvm peer: not built ({peer_jar(peer_folder)} missing: mvn -q package in {peer_folder})",
              file=sys.stderr)
    rows = phase("tiny", labs, peer, rounds, tiny_events, None, 100, 3, solutions, in_lab, plain) if tiny_events else []
    if steady_events:
        rows += phase("steady", labs, peer, rounds, steady_events, 10_000, 20_000, 5, solutions, in_lab, plain)
    return rows


def format_rows(rows: list[dict]) -> str:
    """One line per run: what a user waits for, and the job's pace."""
    lines = ["Tweet views in fresh processes (joinlab run --json; the JVM peer when built), local[2], verified",
             f"  {'phase':7} {'engine':24} {'lab':24} {'first line s':>12} {'first batch s':>13} "
             f"{'median ms':>9} {'steady ev/s':>11}  verified"]
    for r in rows:
        lines.append(f"  {r['phase']:7} {r['engine'][:24]:24} {Path(r['lab']).name[:24]:24} {_or_dash(r['first_line_s']):>12} "
                     f"{_or_dash(r.get('first_batch_s')):>13} {_or_dash(r.get('median_batch_ms')):>9} "
                     f"{_or_dash(r.get('steady_rate')):>11}  {'yes' if r['verified'] and r['exit'] == 0 else 'NO'}")
    if not any(r["engine"] == "jvm peer" for r in rows):
        lines.append("  jvm peer: not built")
    return "\n".join(lines)


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:,}"


if __name__ == "__main__":
    sys.exit(main())
