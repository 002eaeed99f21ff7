"""The Docker Compose stack, checked where no Docker engine runs.

docker-compose.yml and docker-compose.no-registry.yml are validated against the Compose
Specification's JSON Schema and against the lab's own rules (health checks, ports on 127.0.0.1 only,
one image for driver and executors, required Jupyter and Spark Connect tokens, jobs in JupyterLab as
clients of the Connect server, KRaft Kafka with an internal and an external listener, the same Kafka
settings with the no-registry image...). The Dockerfile's build
scripts run here: fetch_jars.py with a stand-in `mvn`, install_connector.py on a stand-in bundle,
the extra CA for pip and for Maven's Java; scripts/compose-up.sh runs with a fake `docker`. The last
tests need a real engine: `docker compose config`, and the whole stack built, started, used and torn
down by scripts/compose-test.sh (`make compose-test`); they skip without one. The Kafka image alone
runs under testcontainers in test_kafka_container.py.
"""
from __future__ import annotations

import copy
import http.server
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.server_side import own_server_env

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
COMPOSE_UP = ROOT / "scripts" / "compose-up.sh"
COMPOSE_TEST = ROOT / "scripts" / "compose-test.sh"
NOTEBOOKS_WRITABLE = ROOT / "scripts" / "notebooks-writable.sh"
NO_REGISTRY_FILE = ROOT / "docker-compose.no-registry.yml"
BUILD_SCRIPTS = ROOT / "docker"
PYPROJECT = ROOT / "pyproject.toml"
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "shared" / "schemas" / "compose-spec.json"

LAB_IMAGE = "stream-join-lab:latest"
LOCAL_KAFKA_IMAGE = "stream-join-lab-kafka:"  # + the Kafka version (docker-compose.no-registry.yml)
LAB_SERVICES = ("spark-master", "spark-worker", "spark-connect", "jupyter")
TOKEN_ARG = re.compile(r"--ServerApp\.token=\$\{JUPYTER_TOKEN:\?[^}]+\}")
CONNECT_TOKEN = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # joinlab.spark.TOKEN_VARIABLE
CONNECT_TOKEN_VALUE = re.compile(r"\$\{SPARK_CONNECT_AUTHENTICATE_TOKEN:\?[^}]+\}")
TOKENS = {"JUPYTER_TOKEN": "test-token", CONNECT_TOKEN: "test-connect-token"}


# --- Loading and interpolating the compose file ----------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def validator():
    if not SCHEMA_PATH.is_file():
        pytest.skip(f"Compose Specification schema not found at {SCHEMA_PATH} (it lives in ../shared, "
                    "beside the repository, on the build machines and in CI)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


class MissingVariable(ValueError):
    """A `${VAR:?message}` whose variable is unset or empty: Compose refuses to start."""


_DOLLAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*)|(?P<bad>))")
_BRACED = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?", re.S)


def interpolate_text(text: str, env: dict[str, str]) -> str:
    """Compose's variable substitution ($$, $VAR, ${VAR}, ${VAR:-d}, ${VAR-d}, ${VAR:?m}, ${VAR?m}, ${VAR:+r})."""
    def substitute(match: re.Match) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("named"):
            return env.get(match.group("named"), "")
        braced = match.group("braced")
        parsed = _BRACED.fullmatch(braced) if braced is not None else None
        if parsed is None or "$" in (parsed.group("arg") or ""):
            raise ValueError(f"invalid (or nested, which these tests do not support) interpolation in {text!r}")
        name, op, arg = parsed.group("name", "op", "arg")
        value = env.get(name)
        if op is None:
            return value or ""
        if op in (":?", "?") and (value is None or (op == ":?" and value == "")):
            raise MissingVariable(f"{name}: {arg}")
        if op == ":-":
            return value if value else arg
        if op == "-":
            return value if value is not None else arg
        if op == ":+":
            return arg if value else ""
        if op == "+":
            return arg if value is not None else ""
        return value
    return _DOLLAR.sub(substitute, text)


def interpolate(node, env: dict[str, str]):
    if isinstance(node, str):
        return interpolate_text(node, env)
    if isinstance(node, list):
        return [interpolate(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate(value, env) for key, value in node.items()}
    return node


def env_example() -> dict[str, str]:
    """The uncommented KEY=VALUE settings of .env.example."""
    settings = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line.strip())
        if match:
            settings[match.group(1)] = match.group(2)
    return settings


def referenced_variables(node) -> set[str]:
    found: set[str] = set()
    if isinstance(node, str):
        for match in _DOLLAR.finditer(node):
            if match.group("named"):
                found.add(match.group("named"))
            elif match.group("braced"):
                found.add(_BRACED.fullmatch(match.group("braced")).group("name"))
    elif isinstance(node, list):
        for item in node:
            found |= referenced_variables(item)
    elif isinstance(node, dict):
        for value in node.values():
            found |= referenced_variables(value)
    return found


def one_shot(services: dict) -> set[str]:
    """Services others wait for with service_completed_successfully: they run once and exit."""
    return {dep for svc in services.values() for dep, spec in (svc.get("depends_on") or {}).items()
            if isinstance(spec, dict) and spec.get("condition") == "service_completed_successfully"}


def long_running(services: dict) -> list[str]:
    return [name for name in services if name not in one_shot(services)]


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {key: str(value) for key, value in env.items()}


def published_ports(service: dict) -> list[tuple[str | None, str]]:
    """(host_ip, text) for every port entry, short ("ip:host:container") or long syntax; the
    host_ip of the entry with its variables' defaults (`${PORT:-15002}` holds a colon)."""
    found = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            found.append((port.get("host_ip"), json.dumps(port)))
            continue
        text = interpolate_text(str(port), {}).split("/")[0]
        if text.startswith("["):  # IPv6 host address
            host_ip = text[1:text.index("]")]
        else:
            parts = text.split(":")
            host_ip = parts[0] if len(parts) == 3 else None
        found.append((host_ip, str(port)))
    return found


def schema_errors(validator, document) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(document)]


# --- The Compose Specification ------------------------------------------------------------------

def test_compose_file_matches_the_compose_spec(validator, compose):
    assert schema_errors(validator, compose) == []


def test_compose_file_matches_the_compose_spec_once_interpolated(validator, compose):
    env = {**env_example(), **TOKENS}
    assert schema_errors(validator, interpolate(compose, env)) == []


def test_no_registry_override_matches_the_compose_spec(validator):
    override = yaml.safe_load(NO_REGISTRY_FILE.read_text())
    assert schema_errors(validator, override) == []
    assert schema_errors(validator, interpolate(override, env_example())) == []


def _misspell_healthcheck(doc):
    doc["services"]["kafka"]["healthchek"] = doc["services"]["kafka"].pop("healthcheck")


def _ports_as_string(doc):
    doc["services"]["jupyter"]["ports"] = "127.0.0.1:8888:8888"


def _unknown_condition(doc):
    doc["services"]["jupyter"]["depends_on"]["kafka"]["condition"] = "service_ready"


def _retries_as_list(doc):
    doc["services"]["kafka"]["healthcheck"]["retries"] = [12]


def _misspelled_top_level(doc):
    doc["service"] = doc.pop("services")


@pytest.mark.parametrize("mutate", [_misspell_healthcheck, _ports_as_string, _unknown_condition,
                                    _retries_as_list, _misspelled_top_level])
def test_schema_validation_rejects_a_broken_copy(validator, compose, mutate):
    """The validation above can fail: each deliberately broken copy gets errors."""
    broken = copy.deepcopy(compose)
    mutate(broken)
    assert broken != compose
    assert schema_errors(validator, broken), f"{mutate.__name__} was not caught by the schema"


# --- The lab's own rules --------------------------------------------------------------------

def test_long_running_services_have_health_checks(services):
    for name in long_running(services):
        check = services[name].get("healthcheck")
        assert check, f"{name} runs continuously but has no healthcheck"
        assert not check.get("disable"), f"{name} disables its healthcheck"
        test = check.get("test")
        assert test and test not in (["NONE"], "NONE"), f"{name}'s healthcheck has no test"


def test_one_shot_services_run_once_and_are_waited_for(services):
    oneshots = one_shot(services)
    assert "topics" in oneshots
    for name in oneshots:
        assert services[name].get("restart") == "no", f"one-shot {name} must not be restarted"
        # `docker compose up --wait` only accepts an exited one-shot when a service of the default
        # set (no profile) waits for it with service_completed_successfully.
        adopters = [other for other, svc in services.items() if not svc.get("profiles")
                    and (svc.get("depends_on") or {}).get(name, {}).get("condition")
                    == "service_completed_successfully"]
        assert adopters, f"no default service waits for {name}: `up --wait` would report it as failed"


def test_every_published_port_is_bound_to_localhost(services):
    for name, svc in services.items():
        for host_ip, text in published_ports(svc):
            assert host_ip == "127.0.0.1", f"{name} publishes {text} beyond this machine"


def test_published_ports_are_the_documented_ones(services):
    published = {text for svc in services.values() for _, text in published_ports(svc)}
    assert {"127.0.0.1:9092:9092", "127.0.0.1:8080:8080", "127.0.0.1:7077:7077",
            "127.0.0.1:8888:8888", "127.0.0.1:8090:8090"} <= published
    assert {"127.0.0.1:15002:15002", "127.0.0.1:4040:4040"} <= {interpolate_text(text, {}) for text in published}


def test_driver_and_executors_share_one_image_and_build(services):
    images = {name: services[name].get("image") for name in LAB_SERVICES}
    builds = {name: services[name].get("build") for name in LAB_SERVICES}
    assert set(images.values()) == {LAB_IMAGE}, images
    assert builds["spark-master"] == builds["spark-worker"] == builds["spark-connect"] == builds["jupyter"], builds
    build = builds["jupyter"]
    assert build["context"] == "." and build["dockerfile"] == "docker/Dockerfile" and build["target"] == "lab"
    assert (ROOT / build["dockerfile"]).is_file()
    # Every other service built from this repository builds the very same image.
    for name, svc in services.items():
        if "build" in svc:
            assert svc["build"] == build and svc.get("image") == LAB_IMAGE, name


def test_build_arg_defaults_match_the_dockerfile(services):
    found = re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M)
    arg_defaults = dict(found)
    assert len(set(found)) == len(arg_defaults), f"one ARG declared with two defaults: {sorted(set(found))}"
    no_registry_kafka = yaml.load(NO_REGISTRY_FILE.read_text(), Loader=_ComposeLoader)["services"]["kafka"]
    for build in (services["jupyter"]["build"], no_registry_kafka["build"]):
        for arg, value in build["args"].items():
            match = re.fullmatch(r"\$\{" + arg + r":-([^}]*)\}", str(value))
            assert match, f"build arg {arg} should be ${{{arg}:-default}}, found {value!r}"
            assert arg_defaults.get(arg) == match.group(1), f"{arg}: compose says {match.group(1)}, " \
                                                             f"the Dockerfile {arg_defaults.get(arg)}"


def test_jupyter_token_comes_from_the_environment_and_is_required(services):
    jupyter = services["jupyter"]
    command = jupyter["command"]
    command = command if isinstance(command, list) else command.split()
    tokens = [arg for arg in command if "token" in arg.lower()]
    assert len(tokens) == 1 and TOKEN_ARG.fullmatch(tokens[0]), tokens
    with pytest.raises(MissingVariable, match="JUPYTER_TOKEN"):
        interpolate(jupyter, {})
    with pytest.raises(MissingVariable, match="JUPYTER_TOKEN"):
        interpolate(jupyter, {"JUPYTER_TOKEN": ""})
    assert "--ServerApp.token=s3cret" in interpolate(command, {"JUPYTER_TOKEN": "s3cret"})


def test_nothing_disables_jupyter_authentication(services):
    text = json.dumps(services["jupyter"])
    for forbidden in ("--ServerApp.token=''", '--ServerApp.token=\\"\\"', "--NotebookApp.token",
                      "--ServerApp.password=''", "disable_check_xsrf", "--IdentityProvider.token="):
        assert forbidden not in text, f"jupyter's settings contain {forbidden}"
    assert not re.search(r"--ServerApp\.token=(\s|\"|$)", text)
    assert "JUPYTER_TOKEN" not in environment(services["jupyter"]) or \
        environment(services["jupyter"])["JUPYTER_TOKEN"].startswith("${JUPYTER_TOKEN:?")


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_lookup_service_needs_its_token_and_shares_it_with_jupyter(services):
    """The token comes from .env through the environment (never the command line, never off);
    without one the service writes its own to $LAB_HOME/run on the volume jupyter mounts too."""
    lookup, jupyter = services["lookup"], services["jupyter"]
    command = lookup["command"]
    assert command[:3] == ["python", "-m", "joinlab.lookup"] and "token" not in json.dumps(command).lower()
    kafka_env = environment(services["kafka"])
    internal = next(f"{host}:{port}" for host, port in _listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"]).values()
                    if host == "kafka")
    assert _flag(command, "--bootstrap") == internal and _flag(command, "--topic") == "money-sessions"
    port = _flag(command, "--port")
    assert _flag(command, "--host") == "0.0.0.0"  # reachable from jupyter; published on 127.0.0.1 only
    assert [text for _, text in published_ports(lookup)] == [f"127.0.0.1:{port}:{port}"]
    for name in ("lookup", "jupyter"):
        env = environment(services[name])
        assert env["LAB_LOOKUP_TOKEN"] == "${LAB_LOOKUP_TOKEN:-}", name
        assert f"lab-state:{env['LAB_HOME']}" in services[name]["volumes"], f"{name} must share the token file"
    assert environment(jupyter)["LAB_LOOKUP_URL"] == f"http://{lookup['hostname']}:{port}"
    assert interpolate(environment(lookup), {})["LAB_LOOKUP_TOKEN"] == ""  # empty: the service makes one
    assert interpolate(environment(lookup), {"LAB_LOOKUP_TOKEN": "s3cret"})["LAB_LOOKUP_TOKEN"] == "s3cret"
    assert f"localhost:{port}" in json.dumps(lookup["healthcheck"]["test"])


class _FakeLookup(http.server.BaseHTTPRequestHandler):
    """Answers /health 200 and /sessions/... with `session_status`."""
    session_status = 401

    def do_GET(self):
        status = 200 if self.path == "/health" else self.session_status
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("session_status, healthy", [(401, True), (200, False), (503, False), (None, False)])
def test_lookup_healthcheck_fails_an_open_or_absent_service(services, session_status, healthy):
    """The health check command itself, run here against a server that enforces a token (healthy),
    one that serves sessions to anyone, one that fails, and nothing at all."""
    test = services["lookup"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python3", "-c"]
    handler = type("Handler", (_FakeLookup,), {"session_status": session_status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    port = server.server_port
    if session_status is None:
        server.server_close()  # nothing listens on the port any more
    else:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        script = re.sub(r"localhost:\d+", f"127.0.0.1:{port}", test[3])
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    finally:
        if session_status is not None:
            server.shutdown()
            server.server_close()
    assert (done.returncode == 0) == healthy, done.stderr
    if session_status == 200:
        assert "serves sessions without a token" in done.stderr


# --- The Spark Connect server --------------------------------------------------------------------

def test_spark_connect_is_published_on_localhost_only_on_the_native_stacks_ports(services):
    """Its command binds every interface inside the stack (jupyter and the executors reach it by
    name); Compose publishes its Connect port and its web UI on 127.0.0.1 only, with the variables and
    defaults the native stack uses for the same two ports (joinlab.stack.settings.PORTS)."""
    from joinlab.stack.settings import PORTS
    connect = services["spark-connect"]
    command = connect["command"]
    assert command[:3] == ["python", "-m", "joinlab.stack.connect_server"]
    assert _flag(command, "--host") == "0.0.0.0"
    port, ui = _flag(command, "--port"), _flag(command, "--ui-port")
    assert (int(port), int(ui)) == (PORTS["connect"].default, PORTS["connect-ui"].default)
    assert [text for _, text in published_ports(connect)] == [
        f"127.0.0.1:${{{PORTS['connect'].env}:-{port}}}:{port}", f"127.0.0.1:${{{PORTS['connect-ui'].env}:-{ui}}}:{ui}"]
    assert [interpolate_text(text, {PORTS["connect"].env: "15102"}) for _, text in published_ports(connect)] == [
        "127.0.0.1:15102:15002", "127.0.0.1:4040:4040"]


def test_spark_connect_token_is_required_in_the_environment_and_shared_with_jupyter(services):
    """Never on a command line (`ps` shows those to all), never empty: the stack refuses to start."""
    for name, others in (("spark-connect", {}), ("jupyter", {"JUPYTER_TOKEN": "j"})):
        service = services[name]
        assert CONNECT_TOKEN_VALUE.fullmatch(environment(service)[CONNECT_TOKEN]), name
        assert CONNECT_TOKEN.lower() not in json.dumps(service["command"]).lower(), name
        with pytest.raises(MissingVariable, match=CONNECT_TOKEN):
            interpolate(service, others)
        with pytest.raises(MissingVariable, match=CONNECT_TOKEN):
            interpolate(service, {**others, CONNECT_TOKEN: ""})
        assert interpolate(environment(service), {CONNECT_TOKEN: "s3cret"})[CONNECT_TOKEN] == "s3cret"


def test_spark_connect_is_the_stacks_driver_on_the_cluster(services):
    """Executors connect back to its service name; it shares the lab state with them and with jupyter
    (clients name checkpoints under LAB_HOME, the server writes them); heaps as docs/docker.md#memory."""
    connect, worker, jupyter = services["spark-connect"], services["spark-worker"], services["jupyter"]
    env = environment(connect)
    assert env["LAB_DRIVER_HOST"] == connect["hostname"] == "spark-connect"
    for name in ("spark-connect", "spark-worker", "jupyter"):
        assert f"lab-state:{env['LAB_HOME']}" in services[name]["volumes"], name
    assert env["SPARK_DRIVER_MEMORY"] == "${SPARK_DRIVER_MEMORY:-1g}"
    assert env["SPARK_EXECUTOR_MEMORY"] == "${SPARK_EXECUTOR_MEMORY:-512m}"
    assert env["MALLOC_ARENA_MAX"] == environment(worker)["MALLOC_ARENA_MAX"]
    assert env["LAB_PYTHON_IDLE_TIMEOUT"] == "${LAB_PYTHON_IDLE_TIMEOUT:-120}"  # a stuck worker killed, as natively
    assert env["SPARK_WORKER_CORES"] == environment(worker)["SPARK_WORKER_CORES"]  # spark.cores.max: a worker's
    assert connect.get("restart") == "unless-stopped" and "profiles" not in connect
    assert "LAB_DRIVER_HOST" not in environment(jupyter)


def test_jupyter_is_a_client_of_the_connect_server_and_runs_no_driver(services):
    connect, jupyter = services["spark-connect"], services["jupyter"]
    env = environment(jupyter)
    assert env["SPARK_REMOTE"] == f"sc://{connect['hostname']}:{_flag(connect['command'], '--port')}"
    assert CONNECT_TOKEN in env
    drivers = [key for key in env if key in ("LAB_DRIVER_HOST", "SPARK_LOCAL_IP") or key.startswith("SPARK_DRIVER")
               or key.startswith("SPARK_EXECUTOR") or "DRIVER_PORT" in key]
    assert drivers == [], f"jupyter runs no driver any more: {drivers}"
    assert jupyter["depends_on"]["spark-connect"] == {"condition": "service_healthy"}
    # Nothing else in the stack is a client or a driver: the generators, topics and lookup need no Spark.
    for name, svc in services.items():
        if name not in ("spark-connect", "jupyter"):
            assert not {"SPARK_REMOTE", CONNECT_TOKEN, "LAB_DRIVER_HOST"} & set(environment(svc)), name


def test_spark_connect_healthcheck_asks_the_server_with_and_without_its_token(services):
    connect = services["spark-connect"]
    check = connect["healthcheck"]
    assert check["test"] == ["CMD", "python3", "-m", "joinlab.stack.connect_server", "--check",
                             "--port", _flag(connect["command"], "--port")]
    # Each check starts a Python client: it gets its time, and the server a minute or more to come up.
    assert int(check["timeout"].rstrip("s")) >= 20 and int(check["interval"].rstrip("s")) >= 10
    assert int(check["retries"]) * int(check["interval"].rstrip("s")) + int(check["start_period"].rstrip("s")) >= 120


def _connect_check(port: int, token: str | None) -> subprocess.CompletedProcess:
    env = own_server_env()
    if token is not None:
        env[CONNECT_TOKEN] = token
    return subprocess.run([sys.executable, "-m", "joinlab.stack.connect_server", "--check", "--port", str(port)],
                          env=env, capture_output=True, text=True, timeout=60)


def test_spark_connect_healthcheck_fails_without_a_token_or_a_server():
    """Where nothing listens, and without a token at all."""
    from joinlab.broker import free_port
    port = free_port()
    assert _connect_check(port, "s3cret").returncode == 1
    missing = _connect_check(port, None)
    assert missing.returncode == 2 and f"${CONNECT_TOKEN} is empty" in missing.stderr


@pytest.mark.spark
def test_spark_connect_healthcheck_passes_with_the_servers_token_only(spark):
    """Against the test session's own Connect server (the lab's settings, on localhost)."""
    from joinlab.spark import server
    url, token = server()
    port = int(url.rsplit(":", 1)[1])
    assert _connect_check(port, token).returncode == 0, _connect_check(port, token).stderr
    assert _connect_check(port, "0" * 32).returncode == 1


def test_spark_connect_service_runs_the_native_stacks_server_command(services, monkeypatch, tmp_path):
    """The service's command, in its environment, is services.connect_command (the native stack's
    spark-submit) on the stack's master, bound to 0.0.0.0, reachable as spark-connect; exec'd with
    the token in its environment and nowhere on its command line."""
    from joinlab import spark as lab_spark
    from joinlab.stack import connect_server
    from joinlab.stack.services import CONNECT_CLASS
    connect = services["spark-connect"]
    env = interpolate(environment(connect), {CONNECT_TOKEN: "s3cret-token"})
    for key in [k for k in os.environ if k.startswith(("SPARK_", "LAB_", "PYSPARK_"))]:
        monkeypatch.delenv(key)
    for key, value in {**env, "LAB_HOME": str(tmp_path)}.items():  # the volume's path is the container's
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(lab_spark, "connector_conf", lambda: {})  # the image has it in pyspark's jars
    execs = []
    monkeypatch.setattr(os, "execve", lambda path, args, environ: execs.append((path, args, environ)))
    assert connect_server.main(connect["command"][3:]) == 1 and len(execs) == 1
    path, cmd, environ = execs[0]
    assert path == cmd[0] and cmd[0].endswith("/bin/spark-submit") and cmd[1:3] == ["--class", CONNECT_CLASS]
    conf = dict(cmd[i + 1].split("=", 1) for i, arg in enumerate(cmd) if arg == "--conf")
    master = services["spark-master"]["command"]
    assert conf["spark.master"] == f"spark://{_flag(master, '--host')}:{_flag(master, '--port')}"
    assert conf["spark.connect.grpc.binding.address"] == "0.0.0.0"
    assert conf["spark.connect.grpc.binding.port"] == _flag(connect["command"], "--port")
    assert conf["spark.ui.port"] == _flag(connect["command"], "--ui-port")
    assert conf["spark.driver.host"] == "spark-connect" and conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert (conf["spark.driver.memory"], conf["spark.executor.memory"]) == ("1g", "512m")
    assert conf["spark.cores.max"] == "2" and conf["spark.python.daemon.module"] == "joinlab.pyworkers"
    assert "s3cret-token" not in " ".join(cmd) and environ[CONNECT_TOKEN] == "s3cret-token"
    assert environ["MALLOC_ARENA_MAX"] == "2"


def _listeners(value: str) -> dict[str, tuple[str, int]]:
    found = {}
    for item in value.split(","):
        name, address = item.strip().split("://")
        host, port = address.rsplit(":", 1)
        found[name] = (host, int(port))
    return found


def test_kafka_runs_kraft_with_an_internal_and_an_external_listener(services):
    kafka = services["kafka"]
    env = environment(kafka)
    assert "zookeeper" not in json.dumps(kafka).lower()
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] and env.get("CLUSTER_ID")
    listeners = _listeners(env["KAFKA_LISTENERS"])
    advertised = _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert controller in listeners and controller not in advertised
    assert set(listeners) <= set(protocols)
    internal = [name for name, (host, _) in advertised.items() if host == "kafka"]
    external = [name for name, (host, _) in advertised.items() if host in ("localhost", "127.0.0.1")]
    assert len(internal) == 1 and len(external) == 1, advertised
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == internal[0]
    for name in internal + external:  # each advertised listener is one the broker listens on
        assert listeners[name][1] == advertised[name][1]
    external_port = advertised[external[0]][1]
    assert f"127.0.0.1:{external_port}:{listeners[external[0]][1]}" in [t for _, t in published_ports(kafka)]
    assert advertised[external[0]][0] == "127.0.0.1"  # published on 127.0.0.1 only: no ::1 to try first
    assert any(volume.endswith(":" + env["KAFKA_LOG_DIRS"]) for volume in kafka["volumes"])
    test = " ".join(kafka["healthcheck"]["test"])
    host, port = advertised[internal[0]]
    assert re.search(r"kafka-(topics|broker-api-versions)\.sh", test) and f"{host}:{port}" in test


def test_kafka_is_the_official_image_of_the_native_labs_version_set_through_its_variables(services):
    """apache/kafka at joinlab.jars.KAFKA_VERSION, configured with the image's documented variables
    only: KAFKA_* (properties, and KAFKA_HEAP_OPTS for the JVM) and CLUSTER_ID; no command, no
    mounted config file. The scripts that look for the image name the same one."""
    from joinlab import jars
    kafka = services["kafka"]
    assert kafka["image"] == f"apache/kafka:{jars.KAFKA_VERSION}"
    assert "command" not in kafka and "entrypoint" not in kafka
    assert not [v for v in kafka["volumes"] if "/mnt/shared/config" in v or "/opt/kafka/config" in v]
    assert [k for k in environment(kafka) if not (k.startswith("KAFKA_") or k == "CLUSTER_ID")] == []
    for script in (COMPOSE_TEST, COMPOSE_UP):
        assert re.findall(r"apache/kafka:[\w.]+", script.read_text()) \
            and set(re.findall(r"apache/kafka:[\w.]+", script.read_text())) == {kafka["image"]}, script.name
    assert f"LOCAL_KAFKA_IMAGE={LOCAL_KAFKA_IMAGE}{jars.KAFKA_VERSION}" in COMPOSE_TEST.read_text()


def test_lab_services_reach_kafka_and_spark_inside_the_stack(services):
    kafka_env = environment(services["kafka"])
    internal = next(f"{host}:{port}" for host, port in _listeners(kafka_env["KAFKA_ADVERTISED_LISTENERS"]).values()
                    if host == "kafka")
    master = services["spark-master"]["command"]
    master_url = f"spark://{master[master.index('--host') + 1]}:{master[master.index('--port') + 1]}"
    for name, svc in services.items():
        if svc.get("image") != LAB_IMAGE:
            continue
        env = environment(svc)
        assert env.get("KAFKA_BOOTSTRAP_SERVERS") == internal, name
        assert env.get("SPARK_MASTER") == master_url, name
    assert master_url in services["spark-worker"]["command"]


def test_depends_on_waits_on_conditions(services):
    for name, svc in services.items():
        depends = svc.get("depends_on")
        if depends is None:
            continue
        assert isinstance(depends, dict), f"{name}: depends_on as a list only waits for 'started'"
        for dep, spec in depends.items():
            assert dep in services, f"{name} depends on unknown {dep}"
            condition = (spec or {}).get("condition")
            assert condition in ("service_healthy", "service_completed_successfully"), (name, dep)
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), f"{name} waits for {dep} to be healthy: no check"
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"
    assert services["spark-connect"]["depends_on"] == {"spark-master": {"condition": "service_healthy"}}
    assert services["jupyter"]["depends_on"] == {
        "kafka": {"condition": "service_healthy"},
        "topics": {"condition": "service_completed_successfully"},
        "spark-connect": {"condition": "service_healthy"},
    }


def test_the_worker_can_scale(services):
    worker = services["spark-worker"]
    assert "container_name" not in worker
    assert not worker.get("ports"), "a host port would clash at --scale spark-worker=2"
    assert "hostname" not in worker
    assert worker["command"][:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]


def test_no_container_names_anywhere(services):
    """Fixed names would stop two checkouts (or `--scale`) from running side by side."""
    assert [name for name, svc in services.items() if "container_name" in svc] == []


def test_third_party_images_are_pinned(services):
    for name, svc in services.items():
        image = svc.get("image", "")
        if image == LAB_IMAGE:
            continue
        repo, _, tag = image.rpartition(":")
        assert repo and re.fullmatch(r"v?\d+(\.\d+)+", tag), f"{name}: {image} is not pinned to a version"
    assert services["kafka"]["image"].startswith("apache/kafka:")


def test_one_generator_service_per_pattern(services):
    try:
        from joinlab.patterns import PATTERNS
    except ImportError as exc:
        pytest.skip(f"joinlab.patterns not importable ({exc})")
    generators = {svc["command"][2]: svc for svc in services.values()
                  if "generators" in (svc.get("profiles") or [])}
    assert set(generators) == set(PATTERNS), "add or remove a gen-<pattern> service in docker-compose.yml"
    for pattern, svc in generators.items():
        command = svc["command"]
        assert command[:3] == ["joinlab", "generate", pattern]
        assert command[command.index("--rate") + 1] == "${GEN_RATE:-50}"
        assert command[command.index("--duration") + 1] == "${GEN_DURATION:-3600}"


def test_env_example_documents_every_variable(compose):
    text = ENV_EXAMPLE.read_text()
    for name in sorted(referenced_variables(compose)):
        assert re.search(rf"^#?\s*{name}=", text, re.M), f"{name} is used in docker-compose.yml, " \
                                                          "not documented in .env.example"
    settings = env_example()
    assert settings["JUPYTER_TOKEN"] == "", "the example must not ship a usable token"
    assert settings["LAB_LOOKUP_TOKEN"] == "", "the example must not ship a usable lookup token"
    assert settings[CONNECT_TOKEN] == "", "the example must not ship a usable Spark Connect token"
    for name in ("GEN_RATE", "GEN_DURATION", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY"):
        assert settings.get(name), name


# --- The Dockerfile -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


def build_script(dockerfile: str, name: str) -> Path:
    """A script the Dockerfile copies from docker/ and runs (no heredocs: see the next test)."""
    assert re.search(rf"^COPY (\S+ )*docker/{re.escape(name)} ", dockerfile, re.M), f"docker/{name} is not copied"
    assert f"/opt/build/{name}" in dockerfile.split(f"docker/{name}", 1)[1], f"docker/{name} is not run"
    return BUILD_SCRIPTS / name


def test_dockerfile_builds_with_the_buildkit_docker_20_10_has(dockerfile):
    """No `# syntax=` line (it pulls a frontend image from a registry) and no heredocs (the frontend
    built into Docker 20.10, Debian bookworm's docker.io, does not know them)."""
    assert not re.search(r"^#\s*syntax\s*=", dockerfile, re.M | re.I)
    assert "<<" not in dockerfile


def stages(dockerfile: str) -> dict[str, str]:
    """Each `FROM ... AS name` stage's text (its FROM line included), in order."""
    parts = re.split(r"^(?=FROM )", dockerfile, flags=re.M)[1:]
    return {re.match(r"FROM \S+ AS (\S+)", part).group(1): part for part in parts}


def test_dockerfile_stages_share_one_java_layer_and_end_with_the_lab(dockerfile):
    found = stages(dockerfile)
    assert list(found) == ["java", "maven", "kafka-jars", "connector-jars", "kafka", "lab"]
    assert found["java"].startswith("FROM ${PYTHON_IMAGE} AS java\n")
    for name in ("maven", "kafka", "lab"):
        assert found[name].startswith(f"FROM java AS {name}\n"), name
    for name in ("kafka-jars", "connector-jars"):
        assert found[name].startswith(f"FROM maven AS {name}\n"), name
    # Only the maven stage installs Maven, and only the two fetching stages are built FROM it.
    assert [name for name, text in found.items() if re.search(r"apt-get install .*\bmaven\b", text)] == ["maven"]
    assert "COPY --from=kafka-jars /opt/jars/kafka/ /opt/kafka/libs/" in found["kafka"]
    assert "from=connector-jars,source=/opt/jars/spark-kafka" in found["lab"]


def test_image_base_java_user_and_python(dockerfile):
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.\d+-slim-bookworm$", dockerfile, re.M)
    java = stages(dockerfile)["java"]
    assert "openjdk-17-jre-headless" in java and "jdk.incubator.vector" in java
    lab = stages(dockerfile)["lab"]
    users = re.findall(r"^USER (\S+)$", lab, re.M)
    assert users and users[-1] not in ("root", "0"), "the image must end as a non-root user"
    env = dict(re.findall(r"\b(PYSPARK_PYTHON|PYSPARK_DRIVER_PYTHON)=(\S+)", lab))
    assert env.get("PYSPARK_PYTHON") == env.get("PYSPARK_DRIVER_PYTHON") == "/usr/local/bin/python3"


def test_kafka_image_has_the_official_images_layout_user_and_entrypoint(dockerfile):
    kafka = stages(dockerfile)["kafka"]
    assert re.findall(r"^USER (\S+)$", kafka, re.M) == ["appuser"]
    assert "useradd --uid 1000" in kafka and "appuser" in kafka
    for folder in ("/opt/kafka/config", "/etc/kafka/docker", "/var/lib/kafka/data", "/mnt/shared/config"):
        assert folder in kafka, folder
    assert "COPY --chown=appuser:appuser docker/kafka/ /etc/kafka/docker/" in kafka
    assert re.search(r'^CMD \["/etc/kafka/docker/run"\]$', kafka, re.M)
    assert re.search(r'^VOLUME \["/var/lib/kafka/data"\]$', kafka, re.M)
    for name in ("run", "healthcheck.py", "server.properties", "log4j2.yaml", "tools-log4j2.yaml"):
        assert (BUILD_SCRIPTS / "kafka" / name).is_file(), name
    assert os.access(BUILD_SCRIPTS / "kafka" / "run", os.X_OK)
    # The entrypoint runs the official image's own setup class, from the Maven jars, then the broker.
    run = (BUILD_SCRIPTS / "kafka" / "run").read_text()
    assert "kafka.docker.KafkaDockerWrapper setup" in run and re.search(r"exec .*\n.*\n.*\n.*kafka\.Kafka ", run)
    assert 'grep -qi "already formatted"' in run


def test_kafka_image_default_config_is_a_single_kraft_node():
    props = dict(line.split("=", 1) for line in (BUILD_SCRIPTS / "kafka" / "server.properties").read_text().splitlines()
                 if line.strip() and not line.startswith("#"))
    assert props["process.roles"] == "broker,controller" and props["log.dirs"] == "/var/lib/kafka/data"
    assert props["controller.quorum.voters"] == "1@localhost:9093"
    assert props["offsets.topic.replication.factor"] == "1"


def test_image_installs_the_lab_with_its_lab_extra(dockerfile):
    includes = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in [p.rstrip("*") for p in includes] + ["notebooks"]:
        assert re.search(rf"^COPY (--\S+ )*{package}[ /]", dockerfile, re.M), f"{package}/ is not copied"
    assert re.search(r"^COPY (--\S+ )*pyproject\.toml ", dockerfile, re.M)
    assert re.search(r"pip install (--\S+ )*'\.\[lab\]'", dockerfile)


def test_the_images_get_their_jars_with_maven_through_joinlab_jars(dockerfile):
    """No jar, version or Maven URL written down in the Dockerfile: the jars are what joinlab.jars
    names (the broker at KAFKA_VERSION, the connector for the pyspark pin), fetched by Maven."""
    found = stages(dockerfile)
    assert "COPY joinlab/__init__.py joinlab/jars.py /opt/build/joinlab/" in found["maven"]
    assert "fetch_jars.py kafka /opt/jars/kafka" in found["kafka-jars"]
    assert "fetch_jars.py spark-kafka /opt/jars/spark-kafka" in found["connector-jars"]
    assert "COPY pyproject.toml" in found["connector-jars"] and "pyproject" not in found["kafka-jars"]
    for name in ("kafka-jars", "connector-jars"):
        assert "--mount=type=cache,target=/root/.m2" in found[name], name
    without_base = re.sub(r"python:3\.\d+\.\d+", "", dockerfile)  # the base image's tag is the one version in it
    assert not re.search(r"\.jar\b|kafka-0-10_2\.\d+|(?<![\d.])\d+\.\d+\.\d+(?![\d.])|maven2/org", without_base)
    assert "install_connector.py /opt/build/spark-kafka" in found["lab"] and "check_connector.py" in found["lab"]


# --- docker/fetch_jars.py, with a stand-in `mvn` --------------------------------------------------

FAKE_MVN = """#!/usr/bin/env python3
# Records its arguments, then does what `mvn dependency:copy-dependencies` would: a jar per dependency.
import os, re, sys
from pathlib import Path
open(os.environ["FAKE_MVN_LOG"], "a").write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_MVN_FAIL"):
    print("[ERROR] Failed to execute goal on project spark-kafka: Could not resolve dependencies")
    sys.exit(1)
args = sys.argv[1:]
settings = args[args.index("-s") + 1] if "-s" in args else None
if settings:
    open(os.environ["FAKE_MVN_LOG"], "a").write(Path(settings).read_text())
pom = Path(args[args.index("-f") + 1]).read_text()
out = Path(next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory=")))
out.mkdir(parents=True)
for artifact, version in re.findall(r"<artifactId>([^<]+)</artifactId><version>([^<]+)</version></dependency>", pom):
    (out / f"{artifact}-{version}.jar").write_bytes(b"jar")
"""


@pytest.fixture
def fake_mvn(tmp_path):
    """(environment with a stand-in `mvn` first on PATH, the file it records its calls in)."""
    fakebin = tmp_path / "fakebin"
    fakebin.mkdir()
    (fakebin / "mvn").write_text(FAKE_MVN.replace("/usr/bin/env python3", sys.executable, 1))
    (fakebin / "mvn").chmod(0o755)
    log = tmp_path / "mvn.log"
    env = {k: v for k, v in os.environ.items() if k not in ("LAB_JARS", "MAVEN_REPO", "PYPROJECT")}
    env.update(PATH=f"{fakebin}{os.pathsep}{env['PATH']}", FAKE_MVN_LOG=str(log))
    return env, log


def _fetch_jars(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD_SCRIPTS / "fetch_jars.py"), *args], env=env, capture_output=True,
                          text=True, timeout=120, cwd=BUILD_SCRIPTS.parent)


def test_fetch_jars_gets_the_connector_for_the_pyspark_pin_with_maven(fake_mvn, tmp_path):
    from joinlab import jars
    env, log = fake_mvn
    env["PYPROJECT"] = str(PYPROJECT)
    pin = re.search(r'"pyspark(?:\[[^\]]*\])?==([^"]+)"', PYPROJECT.read_text()).group(1)
    done = _fetch_jars(env, "spark-kafka", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert f"spark-kafka {pin}: 4 jars in {tmp_path / 'out'}" in done.stdout
    assert sorted(p.name for p in (tmp_path / "out").glob("*.jar")) == sorted([
        f"spark-sql-kafka-0-10_{jars.SCALA}-{pin}.jar", f"spark-token-provider-kafka-0-10_{jars.SCALA}-{pin}.jar",
        f"kafka-clients-{jars.CONNECTOR_KAFKA_CLIENTS}.jar", f"commons-pool2-{jars.CONNECTOR_COMMONS_POOL2}.jar"])
    assert f"org.apache.spark:spark-sql-kafka-0-10_{jars.SCALA}:{pin}" in (tmp_path / "out" / "MANIFEST").read_text()
    call = log.read_text()
    assert "dependency:copy-dependencies" in call and "-DexcludeTransitive=true" in call
    assert not re.search(r"(^| )-s ", call, re.M), "Maven Central needs no settings"


def test_fetch_jars_gets_the_kafka_broker_with_its_closure(fake_mvn, tmp_path):
    from joinlab import jars
    env, log = fake_mvn
    done = _fetch_jars(env, "kafka", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / f"kafka_{jars.SCALA}-{jars.KAFKA_VERSION}.jar").is_file()
    assert "-DexcludeTransitive=false" in log.read_text()


def test_fetch_jars_sends_every_maven_download_to_maven_repo(fake_mvn, tmp_path):
    env, log = fake_mvn
    env["MAVEN_REPO"] = "https://mirror.example/maven2"
    assert _fetch_jars(env, "kafka", str(tmp_path / "out")).returncode == 0
    call = log.read_text()
    assert re.search(r"(^| )-s \S+settings\.xml ", call, re.M)
    assert "<mirrorOf>*</mirrorOf><url>https://mirror.example/maven2</url>" in call


def test_fetch_jars_says_what_maven_said_when_it_fails(fake_mvn, tmp_path):
    env, _ = fake_mvn
    env.update(FAKE_MVN_FAIL="1", PYPROJECT=str(PYPROJECT))
    done = _fetch_jars(env, "spark-kafka", str(tmp_path / "out"))
    assert done.returncode != 0 and "Could not resolve dependencies" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("requirement, says", [("pyspark>=4.2,<5", "must pin pyspark exactly"),
                                                ("pyspark[connect]>=4.2", "must pin pyspark exactly"),
                                                (None, "has no pyspark dependency")])
def test_fetch_jars_needs_an_exact_pyspark_pin(fake_mvn, tmp_path, requirement, says):
    env, log = fake_mvn
    pyproject = tmp_path / "pyproject.toml"
    dependencies = [requirement] if requirement else ["pandas>=2"]
    pyproject.write_text(f"[project]\nname = 'x'\ndependencies = {json.dumps(dependencies)}\n")
    env["PYPROJECT"] = str(pyproject)
    done = _fetch_jars(env, "spark-kafka", str(tmp_path / "out"))
    assert done.returncode != 0 and says in done.stderr
    assert not log.exists(), "Maven must not run"


# --- docker/install_connector.py ------------------------------------------------------------------

def _bundle(tmp_path: Path, spark: str, skip: str | None = None) -> Path:
    from joinlab import jars
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    coordinates = [c.rsplit(":", 1)[0] + ":" + (spark if c.startswith("org.apache.spark:") else c.rsplit(":", 1)[1])
                   for c in jars.connector_coordinates()]
    (bundle / "MANIFEST").write_text("\n".join(coordinates) + "\n")
    for coordinate in coordinates:
        _, artifact, version = coordinate.split(":")
        if artifact != skip:
            (bundle / f"{artifact}-{version}.jar").write_bytes(artifact.encode())
    return bundle


def _install(bundle: Path, dest: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BUILD_SCRIPTS / "install_connector.py"), str(bundle), str(dest)],
                          capture_output=True, text=True, timeout=120)


def test_install_connector_puts_the_bundle_into_pysparks_jars(tmp_path):
    import pyspark
    dest = tmp_path / "jars"
    dest.mkdir()
    done = _install(_bundle(tmp_path, pyspark.__version__), dest)
    assert done.returncode == 0, done.stderr
    assert len(list(dest.glob("*.jar"))) == 4 and any(dest.glob(f"spark-sql-kafka-0-10_*-{pyspark.__version__}.jar"))
    assert done.stdout.count("added ") == 4


def test_install_connector_refuses_a_bundle_for_another_spark(tmp_path):
    import pyspark
    dest = tmp_path / "jars"
    dest.mkdir()
    done = _install(_bundle(tmp_path, "3.5.0"), dest)
    assert done.returncode != 0 and f"for Spark 3.5.0, but pyspark {pyspark.__version__} is installed" in done.stderr
    assert list(dest.iterdir()) == []


def test_install_connector_refuses_a_second_connector_and_a_partial_bundle(tmp_path):
    import pyspark
    dest = tmp_path / "jars"
    dest.mkdir()
    (dest / "spark-sql-kafka-0-10_2.13-0.0.1.jar").write_bytes(b"old")
    done = _install(_bundle(tmp_path, pyspark.__version__), dest)
    assert done.returncode != 0 and "already holds another Kafka connector" in done.stderr
    (dest / "spark-sql-kafka-0-10_2.13-0.0.1.jar").unlink()
    partial = tmp_path / "partial"
    partial.mkdir()
    done = _install(_bundle(partial, pyspark.__version__, skip="commons-pool2"), dest)
    assert done.returncode != 0 and "lacks commons-pool2-" in done.stderr
    assert list(dest.iterdir()) == []


def test_dockerignore_keeps_local_state_and_secrets_out():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for needed in (".venv", ".lab", ".git", ".env"):
        assert needed in patterns, needed
    assert any(p in ("__pycache__", "**/__pycache__") for p in patterns)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_connector_check_fails_where_the_connector_is_missing(dockerfile, tmp_path):
    """The build's smoke check really checks: pyspark here has no Kafka connector, so it fails."""
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark")
    env = {**own_server_env(), "SPARK_LOCAL_IP": "127.0.0.1"}  # a classic session, as in the image build
    result = subprocess.run([sys.executable, str(build_script(dockerfile, "check_connector.py"))], env=env,
                            capture_output=True, text=True, timeout=280, cwd=tmp_path)
    assert result.returncode != 0
    assert "KafkaSourceProvider" in result.stderr


def _with_extra_ca(tmp_path: Path, secret: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_CERT", "SSL_CERT_FILE")}
    env["EXTRA_CA_SECRET"] = str(secret)
    show = f"{sys.executable} -c \"import os; print(os.environ.get('PIP_CERT') == os.environ.get('SSL_CERT_FILE')); " \
           "print(open(os.environ['PIP_CERT']).read() if 'PIP_CERT' in os.environ else 'no extra CA')\""
    return subprocess.run(["sh", str(BUILD_SCRIPTS / "with-extra-ca.sh"), "sh", "-c", show], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)


@pytest.fixture
def new_ca(tmp_path) -> str:
    """A CA certificate (PEM) no bundle has: a self-signed one made here."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate with")
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                           "-subj", "/CN=joinlab-test-extra-ca", "-keyout", str(tmp_path / "ca.key"),
                           "-out", str(tmp_path / "ca.pem")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "ca.pem").read_text()


def test_the_extra_ca_secret_is_trusted_besides_the_default_bundle_and_only_when_given(tmp_path, new_ca):
    if subprocess.run([sys.executable, "-c", "import pip._vendor.certifi"], capture_output=True).returncode:
        pytest.skip("this Python's pip has no vendored certifi")
    cert = new_ca
    secret = tmp_path / "extra_ca"
    secret.write_text(cert)
    given = _with_extra_ca(tmp_path, secret)
    assert given.returncode == 0, given.stderr
    assert given.stdout.startswith("True\n") and cert in given.stdout
    assert given.stdout.count("BEGIN CERTIFICATE") > 10, "the default bundle must stay trusted too"
    assert "1 certificates" in given.stderr
    for absent in (tmp_path / "missing", BUILD_SCRIPTS / "no-extra-ca.pem"):
        plain = _with_extra_ca(tmp_path, absent)
        assert plain.returncode == 0 and "no extra CA" in plain.stdout, plain.stderr


def test_the_extra_ca_is_an_optional_build_secret_used_nowhere_by_default(compose, services, dockerfile):
    assert compose["secrets"]["extra_ca"] == {"file": "${LAB_EXTRA_CA_BUNDLE:-./docker/no-extra-ca.pem}"}
    assert (ROOT / "docker" / "no-extra-ca.pem").read_bytes() == b""
    for name, svc in services.items():
        if "build" in svc:
            assert svc["build"]["secrets"] == ["extra_ca"], name
    no_registry_kafka = yaml.load(NO_REGISTRY_FILE.read_text(), Loader=_ComposeLoader)["services"]["kafka"]
    assert no_registry_kafka["build"]["secrets"] == ["extra_ca"]
    # Every RUN that downloads (pip, Maven) goes through with-extra-ca.sh with the secret mounted.
    downloads = [run for run in re.findall(r"^RUN (?:.*\\\n)*.*$", dockerfile, re.M)
                 if "pip install" in run or "fetch_jars" in run]
    assert len(downloads) == 4
    for run in downloads:
        assert "--mount=type=secret,id=extra_ca" in run and "with-extra-ca.sh" in run, run


def test_the_extra_ca_is_trusted_by_maven_too_and_only_what_the_system_lacks_is_imported(tmp_path, new_ca):
    """Maven is Java: it reads a trust store, not a PEM bundle. with-extra-ca.sh gives it (in
    MAVEN_OPTS) a copy of Java's own with the secret's certificates the system bundle lacks."""
    if not shutil.which("keytool"):
        pytest.skip("no keytool (Java) here")
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    known = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", system.read_text(), re.S) \
        if system.is_file() else None
    secret = tmp_path / "extra_ca"
    secret.write_text((known.group(0) if known else "") + new_ca)
    env = {k: v for k, v in os.environ.items() if k != "MAVEN_OPTS"}
    env["EXTRA_CA_SECRET"] = str(secret)
    show = ('store=$(printf %s "$MAVEN_OPTS" | sed -n "s/.*-Djavax.net.ssl.trustStore=\\([^ ]*\\).*/\\1/p"); '
            'echo "store=$store"; keytool -list -v -keystore "$store" -storepass changeit | grep "^Owner: "')
    done = subprocess.run(["sh", str(BUILD_SCRIPTS / "with-extra-ca.sh"), "sh", "-c", show], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    owners = [line for line in done.stdout.splitlines() if line.startswith("Owner: ")]
    assert "Owner: CN=joinlab-test-extra-ca" in owners and len(owners) > 10  # Java's own CAs stay trusted
    assert f"the {1} of them the system bundle lacks" in done.stderr
    store = re.search(r"^store=(\S+)", done.stdout, re.M).group(1)
    assert not Path(store).exists(), "the trust store must not outlive the command"


# --- docker-compose.no-registry.yml --------------------------------------------------------------

class _ComposeLoader(yaml.SafeLoader):
    """YAML with Compose's !reset and !override tags."""


def _tagged(loader: yaml.SafeLoader, node: yaml.Node):
    if isinstance(node, yaml.MappingNode):
        return node.tag, loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return node.tag, loader.construct_sequence(node, deep=True)
    return node.tag, loader.construct_scalar(node)


_ComposeLoader.add_constructor("!reset", _tagged)
_ComposeLoader.add_constructor("!override", _tagged)


@pytest.fixture(scope="module")
def no_registry() -> dict:
    return yaml.load(NO_REGISTRY_FILE.read_text(), Loader=_ComposeLoader)["services"]


def test_no_registry_kafka_is_built_here_with_the_same_settings(no_registry, services):
    """The kafka service keeps everything of docker-compose.yml (its KAFKA_* environment, listeners,
    published port, data volume); only the image, built from the `kafka` stage, and the health check
    change."""
    from joinlab import jars
    kafka = no_registry["kafka"]
    assert set(kafka) == {"image", "build", "healthcheck"}
    assert kafka["image"] == f"{LOCAL_KAFKA_IMAGE}{jars.KAFKA_VERSION}"
    lab_build = services["jupyter"]["build"]
    assert kafka["build"]["target"] == "kafka"
    for key in ("context", "dockerfile", "secrets"):
        assert kafka["build"][key] == lab_build[key], key
    for arg, value in kafka["build"]["args"].items():  # the same base image and Maven repository
        assert lab_build["args"][arg] == value, arg
    assert set(kafka["build"]["args"]) == {"PYTHON_IMAGE", "MAVEN_REPO"}


def test_no_registry_healthcheck_asks_the_broker_on_the_internal_listener(no_registry, services):
    advertised = _listeners(environment(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"])
    internal = next(f"{host}:{port}" for host, port in advertised.values() if host == "kafka")
    check = no_registry["kafka"]["healthcheck"]
    assert check["test"] == ["CMD", "python3", "/etc/kafka/docker/healthcheck.py", internal]
    assert int(check["retries"]) * int(check["interval"].rstrip("s")) >= 60  # a minute to start, at least
    # test_kafka_container.py runs the script against a real broker.


def test_no_registry_override_leaves_kafka_ui_out_and_nothing_else(no_registry, services):
    assert set(no_registry) == {"kafka", "kafka-ui"}
    assert no_registry["kafka-ui"] == {"profiles": ["ui-needs-a-registry"]}
    assert "ui" in services["kafka-ui"]["profiles"]


# --- scripts/compose-up.sh ----------------------------------------------------------------------

FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$FAKE_DOCKER_LOG"
case "$1" in
  info)
    [ "$FAKE_DOCKER_INFO" = ok ] && exit 0
    echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2
    exit 1 ;;
  compose)
    [ "$2" = version ] && exit 0
    exit "${FAKE_COMPOSE_STATUS:-0}" ;;
  image|pull)
    [ "$FAKE_DOCKER_IMAGES" = none ] && { echo "no such image / no registry" >&2; exit 1; }
    exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def checkout(tmp_path):
    """A copy of the files compose-up.sh uses, plus a fake `docker` first on PATH."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(COMPOSE_UP, repo / "scripts" / "compose-up.sh")
    shutil.copy2(NOTEBOOKS_WRITABLE, repo / "scripts" / "notebooks-writable.sh")
    shutil.copy2(ENV_EXAMPLE, repo / ".env.example")
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    docker = fakebin / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    env = {**os.environ, "PATH": f"{fakebin}{os.pathsep}{os.environ['PATH']}", "FAKE_DOCKER_LOG": str(log),
           "FAKE_DOCKER_INFO": "ok"}
    env.pop("COMPOSE_PROFILES", None)
    return repo, env, log


def _compose_up(repo: Path, env: dict, *args: str):
    return subprocess.run(["bash", str(repo / "scripts" / "compose-up.sh"), *args], env=env, cwd=repo.parent,
                          capture_output=True, text=True, timeout=60)


def _token(repo: Path, name: str = "JUPYTER_TOKEN") -> str:
    return re.search(rf"^{name}=(.*)$", (repo / ".env").read_text(), re.M).group(1)


def test_compose_up_exits_3_without_a_docker_engine(checkout):
    repo, env, log = checkout
    env["FAKE_DOCKER_INFO"] = "down"
    result = _compose_up(repo, env)
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1 and "docker info" in result.stderr
    assert "Cannot connect to the Docker daemon" in result.stderr
    assert not (repo / ".env").exists()
    assert "compose" not in log.read_text()


def test_compose_up_exits_3_when_the_images_are_not_here_and_do_not_pull(checkout, services):
    """An engine but no registry (and the images never pulled): `make up` falls back to the native lab."""
    repo, env, log = checkout
    env["FAKE_DOCKER_IMAGES"] = "none"
    result = _compose_up(repo, env)
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1
    assert f"{services['kafka']['image']} is not here and does not pull" in result.stderr
    assert "compose up" not in log.read_text()


def test_compose_up_exits_3_without_docker_installed(checkout, tmp_path):
    """A PATH of the script's basic tools alone (linked into a folder of their own, since docker
    may live beside them): no docker command at all."""
    repo, env, _ = checkout
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "dirname", "sed", "grep"):
        (tools / tool).symlink_to(shutil.which(tool))
    env["PATH"] = str(tools)
    result = _compose_up(repo, env)
    assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1
    assert "no 'docker' command" in result.stderr


def test_compose_up_writes_a_token_starts_and_prints_the_urls(checkout):
    repo, env, log = checkout
    result = _compose_up(repo, env, "--scale", "spark-worker=2")
    assert result.returncode == 0, result.stderr
    token, connect_token = _token(repo), _token(repo, CONNECT_TOKEN)
    assert re.fullmatch(r"[0-9a-f]{32}", token) and re.fullmatch(r"[0-9a-f]{32}", connect_token)
    assert token != connect_token
    assert stat.S_IMODE((repo / ".env").stat().st_mode) == 0o600
    calls = log.read_text().splitlines()
    assert calls[0] == "info" and "compose up -d --build --wait --scale spark-worker=2" in calls
    assert f"http://localhost:8888/lab?token={token}" in result.stdout
    assert "http://localhost:8080" in result.stdout and "127.0.0.1:9092" in result.stdout
    assert "sc://localhost:15002" in result.stdout and "http://localhost:4040" in result.stdout
    assert connect_token not in result.stdout  # only JupyterLab's link carries its token
    assert (repo / "notebooks").is_dir()
    # The rest of .env.example is kept, and a second run keeps the tokens.
    assert "GEN_RATE=50" in (repo / ".env").read_text()
    assert _compose_up(repo, env).returncode == 0 and _token(repo) == token
    assert _token(repo, CONNECT_TOKEN) == connect_token


def test_compose_up_keeps_a_users_token_and_fills_an_empty_one(checkout):
    repo, env, _ = checkout
    (repo / ".env").write_text(f"GEN_RATE=7\nJUPYTER_TOKEN=mine\n{CONNECT_TOKEN}=also-mine\n")
    assert _compose_up(repo, env).returncode == 0
    assert _token(repo) == "mine" and "GEN_RATE=7" in (repo / ".env").read_text()
    assert _token(repo, CONNECT_TOKEN) == "also-mine"
    (repo / ".env").write_text(f"GEN_RATE=7\nJUPYTER_TOKEN=\n{CONNECT_TOKEN}=\n")
    assert _compose_up(repo, env).returncode == 0
    assert re.fullmatch(r"[0-9a-f]{32}", _token(repo)) and re.fullmatch(r"[0-9a-f]{32}", _token(repo, CONNECT_TOKEN))
    (repo / ".env").write_text("GEN_RATE=7\n")
    assert _compose_up(repo, env).returncode == 0
    assert re.fullmatch(r"[0-9a-f]{32}", _token(repo)) and re.fullmatch(r"[0-9a-f]{32}", _token(repo, CONNECT_TOKEN))
    for name in ("JUPYTER_TOKEN", CONNECT_TOKEN):
        assert (repo / ".env").read_text().count(f"{name}=") == 1, name


@pytest.mark.skipif(os.geteuid() != 0, reason="the notebooks are handed to the image's user only when Docker runs as root")
def test_as_root_the_notebooks_are_handed_to_the_images_user(checkout):
    """JupyterLab runs as LAB_UID on the bind-mounted ./notebooks: root's files would be read-only to it."""
    repo, env, _ = checkout
    (repo / "notebooks" / "sub").mkdir(parents=True)
    (repo / "notebooks" / "sub" / "a.ipynb").write_text("{}")
    (repo / ".env").write_text(f"JUPYTER_TOKEN=x\n{CONNECT_TOKEN}=y\nLAB_UID=4321\n")
    assert _compose_up(repo, env).returncode == 0
    for path in (repo / "notebooks", repo / "notebooks" / "sub", repo / "notebooks" / "sub" / "a.ipynb"):
        assert path.stat().st_uid == 4321, path
    env["LAB_UID"] = "1000"
    done = subprocess.run(["bash", str(repo / "scripts" / "notebooks-writable.sh")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "uid 1000" in done.stdout
    assert (repo / "notebooks" / "sub" / "a.ipynb").stat().st_uid == 1000


def test_compose_up_reports_a_failed_start_with_composes_status(checkout):
    repo, env, _ = checkout
    env["FAKE_COMPOSE_STATUS"] = "1"
    result = _compose_up(repo, env)
    assert result.returncode == 1 and "docker compose logs" in result.stderr
    assert "?token=" not in result.stdout


# --- With a real Docker engine ------------------------------------------------------------------

def _docker_or_skip() -> str:
    """The docker CLI, when an engine answers and Compose v2 is installed; else skip with why."""
    docker = shutil.which("docker")
    if not docker:
        pytest.skip("no Docker engine reachable: no 'docker' command on PATH")
    info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        reason = next((line.strip() for line in info.stderr.splitlines() if line.strip()), "no output")
        pytest.skip(f"no Docker engine reachable: 'docker info' failed ({reason})")
    if subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("Docker Compose v2 ('docker compose') is not installed")
    return docker


@pytest.mark.docker
def test_docker_compose_accepts_the_file(tmp_path):
    docker = _docker_or_skip()
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", CONNECT_TOKEN, "COMPOSE_PROFILES")}
    with_token = tmp_path / "with-token.env"
    with_token.write_text("".join(f"{name}={value}\n" for name, value in TOKENS.items()))
    base = [docker, "compose", "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE)]
    result = subprocess.run([*base, "--env-file", str(with_token), "--profile", "generators", "--profile", "ui",
                             "config", "-q"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    without_token = tmp_path / "without-token.env"
    without_token.write_text(f"GEN_RATE=5\n{CONNECT_TOKEN}=test-token\n")
    result = subprocess.run([*base, "--env-file", str(without_token), "config", "-q"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "JUPYTER_TOKEN" in result.stderr
    without_connect_token = tmp_path / "without-connect-token.env"
    without_connect_token.write_text(f"JUPYTER_TOKEN=test-token\n{CONNECT_TOKEN}=\n")
    result = subprocess.run([*base, "--env-file", str(without_connect_token), "config", "-q"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and CONNECT_TOKEN in result.stderr
    # The no-registry override merges onto the file: Kafka becomes the image built from the `kafka`
    # stage, with the same environment, port and volume as apache/kafka.
    merged = {}
    for files in ([], ["-f", str(NO_REGISTRY_FILE)]):
        result = subprocess.run([*base, *files, "--env-file", str(with_token), "config", "--format", "json"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        merged[bool(files)] = json.loads(result.stdout)["services"]["kafka"]
    official, local = merged[False], merged[True]
    assert local["image"].startswith(LOCAL_KAFKA_IMAGE) and local["build"]["target"] == "kafka"
    for key in ("environment", "ports", "volumes"):
        assert local[key] == official[key], key
    assert local["healthcheck"]["test"][-2:] == ["/etc/kafka/docker/healthcheck.py", "kafka:19092"]


@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_the_stack_comes_up_healthy_and_runs_two_patterns_through_kafka_and_the_spark_cluster():
    """scripts/compose-test.sh (`make compose-test`): the image built, every service healthy, the
    JupyterLab and Spark Connect tokens enforced, every port on 127.0.0.1, tweet-views and
    car-pollution generated by their generator services, joined by jobs that the JupyterLab container
    runs as clients of the Connect server, whose driver runs them on the Spark cluster, verified
    against their references; then everything removed, volumes too."""
    _docker_or_skip()
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", CONNECT_TOKEN, "COMPOSE_PROFILES")}
    done = subprocess.run(["bash", str(COMPOSE_TEST)], env=env, capture_output=True, text=True, timeout=3300)
    print(done.stdout[-6000:])  # the step times, in pytest's captured output
    if done.returncode == 3:  # an engine, but no Compose v2 or base image: nothing was started
        pytest.skip(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    for service in ("kafka", "topics", "spark-master", "spark-worker", "spark-connect", "jupyter", "lookup"):
        assert re.search(rf"^  {service}\t(running\t.*\(healthy\)|exited\tExited \(0\))", done.stdout, re.M), service
    assert "--- Kafka: started, at 127.0.0.1:9092: ok" in done.stdout
    assert "Kafka Server started" in done.stdout and "EXTERNAL listener healthy: 127.0.0.1:9092" in done.stdout
    for pattern in ("tweet-views", "car-pollution"):
        assert f"--- {pattern}: verify: ok" in done.stdout
        assert f"{pattern.replace('-', '_')} ran on the Connect server's application" in done.stdout
    assert done.stdout.count("no JVM in the JupyterLab container") == 2
    assert "refused without the token (and with a wrong one), runs a query with it" in done.stdout
    assert "nothing left running" in done.stdout and "refused without the token" in done.stdout
