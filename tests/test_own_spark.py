"""Every pattern on a Spark Connect server that is not the lab's (tests/plain_spark.py: PySpark and
Spark's Kafka connector, run as `nobody` from a folder of its own, nothing of the lab): `joinlab
run --available-now` and `verify` as a user runs them, with SPARK_REMOTE, the server's token and
LAB_CHECKPOINTS (a URI: the server keeps the checkpoints, the client never reads them itself);
money enrichment asking a lookup service the server's executors reach; a candidate's module graded
live by `interview check`. And what a wrong server says, in one line; and that the secrets stay
off command lines, logs and printed lines (docs/operations.md#your-own-spark)."""
from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys

import pyspark
import pytest
from cryptography.hazmat.primitives import serialization

from joinlab.patterns import PATTERNS
from joinlab.spark import version_problem
from tests import plain_spark, secured_kafka
from tests.conftest import ROOT
from tests.secured_kafka import certificate_authority, pem, server_certificate
from tests.test_secured_kafka import USER, user_env
from tests.watched import Watched

SOLUTION = ROOT / "jobs" / "tweet_views" / "solution.py"
CLIENT_RELEASE = ".".join(pyspark.__version__.split(".")[:2])
OTHER_RELEASE = "4.1.4"  # a server of the feature release before the client's (its PySpark in a virtualenv beside)
# Money enrichment's very late transactions find their session gone from state: the job asks the
# lookup service for it (as tests/test_money_enrichment.py generates them), in a later micro-batch
# than their session's, once the watermark has passed it.
GENERATE = {"money-enrichment": ["--count", "2000", "--users", "40", "--session-seconds", "30", "--very-late", "0.05",
                                  "--late-by", "60"]}
RUN = {"money-enrichment": ["--max-offsets-per-trigger", "200"]}
SETTINGS = {"MONEY_SESSION_DURATION": "30 seconds"}  # the generator's sessions


WATCHED = Watched()


def joinlab(server: plain_spark.PlainServer, bootstrap: str, home, *args: str,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """`joinlab ARGS` as a user of `server` runs it, watched (WATCHED); its
    checkpoints in a folder of the test's own on the server (one the server keeps would be resumed)."""
    environ = {**server.client_env({**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(home)}),
               "LAB_CHECKPOINTS": f"{server.checkpoints}/{home.name}", **(env or {})}
    return WATCHED.joinlab(environ, *args)


def test_a_server_without_the_kafka_connector_is_named_in_one_line(bootstrap, tmp_path):
    server = plain_spark.start(with_connector=False)
    try:
        done = joinlab(server, bootstrap, tmp_path, "run", "tweet-views", "--available-now", "--quiet")
    finally:
        server.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "joinlab run tweet-views: the Spark Connect server has no Kafka connector: start it with Spark's own "
        "(org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 and its dependencies: spark-submit's --packages, or "
        "their jars in --jars; docs/operations.md#your-own-spark)"], done.stderr


def test_a_server_of_another_spark_release_is_refused_in_one_line(bootstrap, tmp_path):
    server = plain_spark.start(with_connector=False, version=OTHER_RELEASE)
    try:
        done = joinlab(server, bootstrap, tmp_path, "run", "tweet-views", "--available-now", "--quiet")
    finally:
        server.stop()
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"joinlab run tweet-views: the Spark Connect server at {server.url} runs Spark {OTHER_RELEASE}, and the lab's "
        f"client is PySpark {pyspark.__version__}: run it on a Spark {CLIENT_RELEASE}.x server "
        "(docs/operations.md#your-own-spark)"], done.stderr


def test_a_patch_release_of_the_client_s_is_not_another_release():
    assert version_problem("4.2.1", "4.2.0") is None and version_problem("4.2.0", "4.2.3") is None
    assert version_problem("4.3.0", "4.2.0") is not None


@pytest.fixture(scope="module")
def plain():
    server = plain_spark.start()
    yield server
    server.stop()


def test_the_server_has_nothing_of_the_lab_and_cannot_read_the_client_s_folders(plain, tmp_path):
    python = str(plain_spark.venv() / "bin" / "python")
    for module in ("joinlab", "jobs"):
        done = subprocess.run([python, "-c", f"import {module}"], cwd=plain.folder, capture_output=True, text=True,
                              preexec_fn=plain_spark.procs.as_user(plain_spark.USER), env={"PATH": "/usr/bin:/bin"})
        assert f"No module named '{module}'" in done.stderr, done.stderr
    done = subprocess.run(["ls", str(tmp_path)], capture_output=True, text=True,
                          preexec_fn=plain_spark.procs.as_user(plain_spark.USER), env={"PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "Permission denied" in done.stderr


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_every_pattern_runs_on_the_server_and_its_output_matches_the_reference(plain, bootstrap, tmp_path, pattern):
    env = {}
    if pattern == "money-enrichment":  # a lookup service of the test's own, at an address the server reaches
        from joinlab.lookup import LookupService
        from joinlab.patterns import job
        service = LookupService(bootstrap, topic=job(pattern).LOOKUP.schema.topic, port=0).__enter__()
        env = {"LAB_LOOKUP_URL": service.url, "LAB_LOOKUP_TOKEN": service.token, **SETTINGS}
        SECRETS.append(service.token)
    try:
        made = joinlab(plain, bootstrap, tmp_path, "generate", pattern, "--seed", "11", "--no-progress",
                       *GENERATE.get(pattern, ["--count", "800"]))
        assert made.returncode == 0, made.stderr
        run = joinlab(plain, bootstrap, tmp_path, "run", pattern, "--available-now", "--quiet", *RUN.get(pattern, []),
                      env=env)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
        verified = joinlab(plain, bootstrap, tmp_path, "verify", pattern, env=env)
    finally:
        if env:
            service.__exit__(None, None, None)
    assert verified.returncode == 0 and "0 mismatches (OK)" in verified.stdout, verified.stdout
    if pattern == "money-enrichment":
        assert re.search(r", [1-9]\d* by lookup", verified.stdout), verified.stdout
    offsets = plain.folder / "checkpoints" / tmp_path.name / pattern / "offsets"
    assert offsets.is_dir() and offsets.stat().st_uid == pwd.getpwnam(plain_spark.USER).pw_uid, \
        "the server wrote the checkpoint, as its own user"
    assert not (tmp_path / "checkpoints").exists(), "the client made no checkpoint of its own"


# A notebook's second pattern: its modules are imported after the session is made.
SECOND_PATTERN = """
import sys
from joinlab import patterns, runner
from joinlab.spark import session
from joinlab.topics import create_topics
spark = session()
assert "jobs.lottery.given" not in sys.modules  # the premise: the pattern's state types come later
job = patterns.job("lottery")
create_topics(sys.argv[1], patterns.all_topics("lottery"))  # as joinlab run does: the outputs' partitions too
runner.start(spark, job, sys.argv[1], runner.new_checkpoint("second"), available_now=True).awaitTermination()
"""


def test_a_pattern_imported_after_the_session_was_made_runs_on_the_server(plain, bootstrap, tmp_path):
    assert joinlab(plain, bootstrap, tmp_path, "generate", "lottery", "--count", "300", "--no-progress").returncode == 0
    env = {**plain.client_env({**os.environ, "LAB_HOME": str(tmp_path)}),
           "LAB_CHECKPOINTS": f"{plain.checkpoints}/{tmp_path.name}"}
    ran = subprocess.run([sys.executable, "-c", SECOND_PATTERN, bootstrap], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, "\n".join(line for line in ran.stderr.splitlines() if "Error" in line)[-3000:]
    verified = joinlab(plain, bootstrap, tmp_path, "verify", "lottery")
    assert "0 mismatches (OK)" in verified.stdout and not verified.stdout.startswith("lottery: 0 expected"), \
        verified.stdout


def test_a_job_resumes_from_the_server_s_checkpoint_whose_state_the_client_reads_through_the_server(
        plain, bootstrap, tmp_path):
    pattern, checkpoint = "lottery", f"{plain.checkpoints}/resumed"
    for seed in (["--seed", "3"], []):  # the second time, on topics that hold records: new ids, later times
        assert joinlab(plain, bootstrap, tmp_path, "generate", pattern, "--count", "500", *seed,
                       "--no-progress").returncode == 0
        run = joinlab(plain, bootstrap, tmp_path, "run", pattern, "--available-now", "--quiet",
                      "--checkpoint", checkpoint)
        assert run.returncode == 0, run.stderr[-3000:]
    verified = joinlab(plain, bootstrap, tmp_path, "verify", pattern)
    assert "0 mismatches (OK)" in verified.stdout, verified.stdout
    batches = sorted(int(f.name) for f in (plain.folder / "checkpoints" / "resumed" / "commits").iterdir()
                     if f.name.isdigit())
    assert len(batches) >= 2 and batches == list(range(len(batches))), "the second run went on from the first"
    unknown = joinlab(plain, bootstrap, tmp_path, "state", pattern, "--checkpoint", checkpoint, "--var", "nope")
    assert unknown.returncode == 2 and re.search(r"no state variable named nope in \S+; it holds: \w", unknown.stderr), \
        unknown.stderr  # what it holds, read by the server from its checkpoint
    here = joinlab(plain, bootstrap, tmp_path, "run", pattern, "--available-now", "--checkpoint", str(tmp_path / "here"))
    assert here.returncode == 1 and here.stderr.strip().splitlines() == [
        f"joinlab run {pattern}: the checkpoint {tmp_path / 'here'} is a path on this machine, and the Spark server is "
        "not the lab's: it would write its own folder of that name, and this client would read another. Name one on "
        "the server's side with a URI: $LAB_CHECKPOINTS (file:///srv/spark/checkpoints, s3a://bucket/lab) or "
        "--checkpoint URI (docs/operations.md#your-own-spark)."], here.stderr
    reset = joinlab(plain, bootstrap, tmp_path, "run", pattern, "--reset", "--checkpoint", checkpoint)
    assert reset.returncode == 2 and "is on the Spark server's side, where the lab deletes nothing" in reset.stderr
    assert (plain.folder / "checkpoints" / "resumed" / "commits").is_dir()


def test_a_candidate_s_module_is_graded_live_on_the_server(plain, bootstrap, tmp_path):
    candidate = tmp_path / "answer.py"
    shutil.copy(SOLUTION, candidate)  # a module the server has never seen: its classes travel by value
    done = joinlab(plain, bootstrap, tmp_path, "interview", "check", "tweet-views", "--solution", str(candidate),
                   "--live")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"tweet-views: (\d+) expected, \1 in output, 0 mismatches", done.stdout), done.stdout


def test_a_server_behind_tls_is_reached_with_use_ssl_and_an_untrusted_certificate_is_one_line(
        plain, bootstrap, tmp_path):
    ca_key, ca = certificate_authority()
    key, cert = server_certificate(ca_key, ca)
    (tmp_path / "server.pem").write_text(pem(cert))
    (tmp_path / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                            serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
    (tmp_path / "ca.pem").write_text(pem(ca))
    (tmp_path / "other-ca.pem").write_text(pem(certificate_authority("another CA")[1]))
    proxy = plain_spark.TlsProxy(plain.port, tmp_path / "server.pem", tmp_path / "server.key")
    tls = {"SPARK_REMOTE": f"sc://localhost:{proxy.port}/;use_ssl=true"}
    try:
        assert joinlab(plain, bootstrap, tmp_path, "generate", "tweet-views", "--count", "300", "--seed", "5",
                       "--no-progress").returncode == 0
        run = joinlab(plain, bootstrap, tmp_path, "run", "tweet-views", "--available-now", "--quiet",
                      env={**tls, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / "ca.pem")})
        untrusted = joinlab(plain, bootstrap, tmp_path, "run", "tweet-views", "--available-now", "--quiet",
                            env={**tls, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / "other-ca.pem")})
    finally:
        proxy.close()
    assert run.returncode == 0, run.stderr[-3000:]
    verified = joinlab(plain, bootstrap, tmp_path, "verify", "tweet-views")
    assert "0 mismatches (OK)" in verified.stdout, verified.stdout
    assert untrusted.returncode == 2 and len(untrusted.stderr.strip().splitlines()) == 1, untrusted.stderr
    assert "TLS" in untrusted.stderr and "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH" in untrusted.stderr, untrusted.stderr


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with secured_kafka.running(tmp_path_factory.mktemp("secured-kafka"), USER, ["tweet-views"]) as kafka:
        yield kafka


def test_your_own_kafka_and_your_own_spark_together_sasl_ssl_through_the_plain_server(plain, secured, tmp_path):
    """The Kafka of tests/test_secured_kafka.py (SASL_SSL, SCRAM-SHA-512, ACLs: the user may use
    tweet views' topics only) and the plain server: the Kafka settings travel in the query's
    options to the server's executors; the server's log is a file here, read below for the password."""
    SECRETS.append(secured.password)
    env = {"LAB_KAFKA_PROPERTIES": user_env(secured, tmp_path / "alice")["LAB_KAFKA_PROPERTIES"]}
    made = joinlab(plain, secured.secured, tmp_path, "generate", "tweet-views", "--count", "300", "--seed", "8",
                   "--no-progress", env=env)
    assert made.returncode == 0, made.stderr[-2000:]
    run = joinlab(plain, secured.secured, tmp_path, "run", "tweet-views", "--available-now", "--quiet", env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    verified = joinlab(plain, secured.secured, tmp_path, "verify", "tweet-views", env=env)
    assert "0 mismatches (OK)" in verified.stdout and not verified.stdout.startswith("tweet-views: 0 expected"), \
        verified.stdout + verified.stderr


SECRETS: list[str] = []


def test_no_secret_on_a_command_line_in_the_server_s_log_or_in_a_printed_line(plain):
    """After the tests above (their command lines were watched while they ran)."""
    secrets = [plain.token, *SECRETS]
    assert WATCHED.printed and len(WATCHED.command_lines) > 10 and len(secrets) >= 2, "the tests above ran first"
    log = plain.log.read_text(errors="replace")
    assert "Spark Connect server started" in log
    for secret in secrets:
        assert not WATCHED.holding(secret)
        assert secret not in log
