"""The lab's own Apache Kafka image: the `kafka` stage of docker/Dockerfile, which
docker-compose.no-registry.yml runs where the official apache/kafka image cannot be pulled.

Without Docker: the official image's rule for KAFKA_* variables applied to the stack's settings,
the entrypoint's refusals, and the health check against the session's embedded broker. With a
Docker engine: the image, built by Compose as `make compose-test` builds it, started by
testcontainers' generic DockerContainer with docker-compose.yml's own environment, waited for on
the broker's "Kafka Server started" line, and used for real: tweet-views generated into it, joined
by the session's Spark job, verified; then restarted on its data, which it keeps.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from joinlab import jars
from tests.conftest import docker_problem

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
NO_REGISTRY_FILE = ROOT / "docker-compose.no-registry.yml"
ENTRYPOINT = ROOT / "docker" / "kafka" / "run"
HEALTHCHECK = ROOT / "docker" / "kafka" / "healthcheck.py"
OFFICIAL_BASE_IMAGE = "python:3.11.15-slim-bookworm"
LOCAL_BASE_IMAGE = "stream-join-lab-base:bookworm-python3.11"
# The official image's variables that set up the JVM or logging, not server.properties.
NOT_PROPERTIES = {"KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
                  "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
                  "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME"}


def server_properties(env: dict[str, str]) -> dict[str, str]:
    """The official image's documented rule: KAFKA_ dropped, lower case, _ -> ., ___ -> -, __ -> _."""
    return {key.removeprefix("KAFKA_").lower().replace("_", ".").replace("...", "-").replace("..", "_"): value
            for key, value in env.items() if key.startswith("KAFKA_") and key not in NOT_PROPERTIES}


def stack_kafka_environment() -> dict[str, str]:
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["kafka"]
    return {key: str(value) for key, value in service["environment"].items()}


def local_image() -> str:
    return yaml.safe_load(NO_REGISTRY_FILE.read_text())["services"]["kafka"]["image"]


# --- Without Docker -----------------------------------------------------------------------------

def test_the_stacks_variables_are_the_kafka_settings_the_native_broker_uses():
    from joinlab.broker import RETENTION
    env = stack_kafka_environment()
    assert set(env) - {"CLUSTER_ID"} <= {key for key in env if key.startswith("KAFKA_")}
    props = server_properties(env)
    assert props["process.roles"] == "broker,controller" and props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@kafka:9093"
    assert props["log.dirs"] == "/var/lib/kafka/data"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor",
                "share.coordinator.state.topic.min.isr"):
        assert props[key] == "1", key  # one node: one replica of every internal topic
    assert {key: props.get(key) for key in RETENTION} == RETENTION
    from joinlab.broker import MEMORY
    assert {key: props.get(key) for key in MEMORY} == MEMORY
    from joinlab.broker import HEAP  # the native broker's heap, by default (.env may set another)
    assert "heap.opts" not in props and env["KAFKA_HEAP_OPTS"] == "${KAFKA_HEAP_OPTS:-" + HEAP + "}"
    # The rule itself, on the names it has to escape.
    assert server_properties({"KAFKA_ABC___DEF__GHI_JK": "1", "KAFKA_OPTS": "-Dx", "CLUSTER_ID": "c"}) == \
        {"abc-def_ghi.jk": "1"}


def _layout(tmp_path: Path) -> Path:
    """The image's folders under tmp_path (the entrypoint's LAB_KAFKA_ROOT), without the jars."""
    for folder in ("opt/kafka/libs", "opt/kafka/config", "etc/kafka/docker", "mnt/shared/config"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def _entrypoint(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ENTRYPOINT), *args], env={"PATH": os.environ["PATH"], "LAB_KAFKA_ROOT": str(root),
                                                                 **env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("env, says", [
    ({"KAFKA_PROCESS_ROLES": "controller", "CLUSTER_ID": "x", "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9092"},
     "KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller."),
    ({"KAFKA_PROCESS_ROLES": "broker,controller", "KAFKA_ADVERTISED_LISTENERS": "SSL://kafka:9093"},
     "SSL and SASL listeners are not supported by this image"),
    ({"KAFKA_LISTENERS": "SASL_PLAINTEXT://:9094"}, "SSL and SASL listeners are not supported by this image"),
])
def test_the_entrypoint_refuses_what_the_image_cannot_run_and_says_why(tmp_path, env, says):
    done = _entrypoint(_layout(tmp_path), env)
    assert done.returncode == 1 and says in done.stdout, done.stdout + done.stderr
    assert "===> Launching" not in done.stdout  # nothing was started
    assert not (tmp_path / "opt/kafka/config/server.properties").exists()


def test_the_entrypoint_needs_a_writable_config_folder(tmp_path):
    root = _layout(tmp_path)
    (root / "opt/kafka/config").rmdir()  # (a read-only folder would not do: the tests may run as root)
    done = _entrypoint(root, {"KAFKA_PROCESS_ROLES": "broker,controller", "CLUSTER_ID": "x"})
    assert done.returncode == 1 and "opt/kafka/config/ file not writable" in done.stdout, done.stdout


def _healthcheck(address: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HEALTHCHECK), address, *args], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if k != "CLUSTER_ID"})


def test_the_healthcheck_fails_where_no_broker_answers():
    done = _healthcheck("127.0.0.1:9")
    assert done.returncode == 1 and "no Kafka answer from 127.0.0.1:9" in done.stderr


def test_the_healthcheck_passes_on_a_broker_of_its_cluster_only(kafka):
    """The check the no-registry stack's `kafka` service runs, against the session's real broker."""
    ok = _healthcheck(kafka.bootstrap_servers, "--cluster-id", kafka.info.cluster_id)
    assert ok.returncode == 0 and f"healthy: {kafka.bootstrap_servers}" in ok.stdout, ok.stderr
    assert _healthcheck(kafka.bootstrap_servers).returncode == 0  # no cluster id given: any cluster
    other = _healthcheck(kafka.bootstrap_servers, "--cluster-id", "bmc8jFC7RxupnV7qw-uNvA")
    assert other.returncode == 1 and f"belongs to cluster {kafka.info.cluster_id}" in other.stderr


def test_the_local_image_is_the_version_the_native_lab_runs():
    assert local_image() == f"stream-join-lab-kafka:{jars.KAFKA_VERSION}"
    official = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["kafka"]["image"]
    assert official == f"apache/kafka:{jars.KAFKA_VERSION}"


# --- With a Docker engine -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kafka_image(tmp_path_factory) -> str:
    """The local Kafka image, built by Compose from docker-compose.no-registry.yml as
    scripts/compose-test.sh builds it (a cache hit after it; a ~30 s build on a fresh engine)."""
    problem = docker_problem()
    if problem:
        pytest.skip(problem)
    base = next((image for image in (OFFICIAL_BASE_IMAGE, LOCAL_BASE_IMAGE)
                 if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0), None)
    if base is None:
        pytest.fail(f"a Docker engine answers, but neither {OFFICIAL_BASE_IMAGE} nor {LOCAL_BASE_IMAGE} is here: "
                    "run scripts/docker-engine.sh (it builds the local base image where no registry answers)")
    env_file = tmp_path_factory.mktemp("kafka-image") / "build.env"
    env_file.write_text("JUPYTER_TOKEN=unused-by-the-build\nSPARK_CONNECT_AUTHENTICATE_TOKEN=unused-by-the-build\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("JUPYTER_TOKEN", "SPARK_CONNECT_AUTHENTICATE_TOKEN", "COMPOSE_PROFILES")}
    env["PYTHON_IMAGE"] = base
    bundle = env.get("LAB_EXTRA_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    if bundle != "none" and Path(bundle).is_file() and Path(bundle).stat().st_size:
        env["LAB_EXTRA_CA_BUNDLE"] = bundle  # as compose-test.sh: behind the same TLS interception as the host
    else:
        env.pop("LAB_EXTRA_CA_BUNDLE", None)
    done = subprocess.run(["docker", "compose", "--project-name", "joinlab-kafka-image", "--project-directory", str(ROOT),
                           "-f", str(COMPOSE_FILE), "-f", str(NO_REGISTRY_FILE), "--env-file", str(env_file),
                           "build", "kafka"], env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        pytest.fail(f"building {local_image()} (docker compose ... build kafka, base {base}) failed:\n"
                    + (done.stdout + done.stderr)[-4000:])
    return local_image()


@pytest.mark.docker
@pytest.mark.spark
@pytest.mark.timeout(900)
def test_the_local_kafka_image_runs_tweet_views_under_testcontainers(kafka_image, spark, tmp_path, monkeypatch):
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    import jobs.tweet_views.parts as tv
    from generators.tweet_views import generate
    from joinlab.broker import free_port
    from joinlab.generate import Disorder, send
    from joinlab.topics import create_topics
    from joinlab.verify import verify
    from tests.conftest import run_job_to_end, wait_for

    # Ryuk, testcontainers' reaper, is an image from a registry: without it, the `with` block
    # removes the container (and its volume) itself.
    monkeypatch.setattr(testcontainers_config, "ryuk_disabled", True)
    port = free_port()
    env = stack_kafka_environment()
    env["KAFKA_ADVERTISED_LISTENERS"] = re.sub(r"EXTERNAL://[^,]+", f"EXTERNAL://127.0.0.1:{port}",
                                               env["KAFKA_ADVERTISED_LISTENERS"])
    env["KAFKA_HEAP_OPTS"] = "-Xms128m -Xmx512m"
    started = LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(180)
    # The stack's name for the broker (its controller quorum is 1@kafka:9093); the EXTERNAL
    # listener published on this machine only, at the port it advertises.
    container = DockerContainer(kafka_image).with_envs(**env).with_kwargs(hostname="kafka").waiting_for(started)
    container.ports["9092/tcp"] = ("127.0.0.1", port)
    bootstrap = f"127.0.0.1:{port}"
    with container:
        wrapped = container.get_wrapped_container()
        code, written = wrapped.exec_run(["cat", "/opt/kafka/config/server.properties"])
        assert code == 0
        lines = [line for line in written.decode().splitlines() if line.strip()]
        assert dict(line.split("=", 1) for line in lines) == server_properties(env)
        code, health = wrapped.exec_run(["python3", "/etc/kafka/docker/healthcheck.py", "kafka:19092"])
        assert code == 0, health.decode()  # the no-registry stack's health check, on the INTERNAL listener

        create_topics(bootstrap, tv.INPUT_TOPICS + tv.OUTPUT_TOPICS)
        send(bootstrap, generate(7, 1000, disorder=Disorder(delayed=0.3, max_delay_s=10, duplicates=0.05)),
             progress=False)
        run_job_to_end(spark, tv, bootstrap, tmp_path / "cp")
        report = verify("tweet-views", bootstrap)
        assert report.expected > 500
        assert report.ok, "\n".join(report.lines())

        # A restart keeps the log directory (formatted once) and with it every record.
        wrapped.restart(timeout=60)
        # (LogMessageWaitStrategy finds a line once, whatever its `times`: the first start's would do.)
        logs = wait_for(lambda: (text := wrapped.logs().decode()).count("Kafka Server started") >= 2 and text, 180,
                        "the restarted broker's 'Kafka Server started' line")
        assert logs.count("Formatting metadata directory") == 1  # formatted by the first start only
        assert verify("tweet-views", bootstrap).ok
    # The session server's cached Kafka producers for this broker would log its absence every second
    # (until the pool's idle timeout): the server, in this process, runs on for the other tests.
    # Its JVM's own pool (tests/server_side.py): a Connect client reaches no JVM object.
    from tests.server_side import server_session
    jvm = server_session()._jvm
    pool = jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(
        "org.apache.spark.sql.kafka010.producer.InternalKafkaProducerPool$").getField("MODULE$").get(None)
    pool.reset()
