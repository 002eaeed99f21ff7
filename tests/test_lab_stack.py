"""The native lab stack (`make up-native` = `joinlab lab up`): real broker, Spark master and worker,
the Spark Connect server every job and notebook is a client of, JupyterLab and the session lookup
service, started and stopped through the CLI in an isolated LAB_HOME on free ports.

The stack tests share one stack (module fixture) and run in file order: healthy -> loopback only ->
token -> idempotent -> a job as a client of the lab's server -> a background generator -> `down`
leaves nothing.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from joinlab import class_archive
from joinlab.broker import bindable, free_port
from joinlab.patterns import PATTERNS
from joinlab.stack import procs, settings
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[1]
PORT_VARS = {key: spec.env for key, spec in settings.PORTS.items()}
CORE = ["broker", "spark-master", "spark-worker", "spark-connect", "jupyter", "lookup"]


def lab_env(home: Path) -> dict[str, str]:
    """The environment of a stack of our own: its LAB_HOME, its .env, free ports, no outside master
    or Connect server (the test session's, tests/conftest), and the server's web UI on, as a
    participant has it (the tests turn it off elsewhere)."""
    env = dict(os.environ)
    for var in ("SPARK_MASTER", "SPARK_REMOTE", "SPARK_CONNECT_AUTHENTICATE_TOKEN", "KAFKA_BOOTSTRAP_SERVERS",
                "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE", "LAB_HOME", "LAB_LOOKUP_TOKEN", "LAB_LOOKUP_URL"):
        env.pop(var, None)
    env["LAB_SPARK_UI"] = "true"
    ports: set[int] = set()
    while len(ports) < len(PORT_VARS):
        ports.add(free_port())
    env.update(zip(PORT_VARS.values(), map(str, sorted(ports))))
    env.update(LAB_HOME=str(home / "lab"), LAB_ENV_FILE=str(home / ".env"), LAB_NOTEBOOK_DIR=str(home / "notebooks"))
    return env


def joinlab(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joinlab", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def ps_states(env: dict) -> dict[str, str]:
    done = joinlab(env, "lab", "ps")
    assert done.returncode == 0, done.stderr
    return {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()[1:] if len(line.split()) >= 2
            and not line.startswith("Nothing")}


def ps_memory(env: dict) -> dict[str, tuple[int, int]]:
    """Each running service's pid and the memory `lab ps` shows for it, in bytes."""
    done = joinlab(env, "lab", "ps")
    assert done.stdout.splitlines()[0].split() == ["SERVICE", "STATE", "PID", "MEMORY", "URL"], done.stdout
    unit = {"MiB": 1 << 20, "GiB": 1 << 30}
    return {name: (int(pid), int(float(size) * unit[suffix])) for name, state, pid, size, suffix, *_ in
            (line.split() for line in done.stdout.splitlines()[1:] if len(line.split()) >= 5)
            if state in ("healthy", "running")}


def port_of(env: dict, key: str) -> int:
    return int(env[PORT_VARS[key]])


# --- Without a stack ---------------------------------------------------------------------------

def test_ps_when_nothing_runs(tmp_path):
    env = lab_env(tmp_path)
    done = joinlab(env, "lab", "ps")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["SERVICE", "STATE", "PID", "MEMORY", "URL"]
    assert ps_states(env) == {name: "stopped" for name in CORE}
    assert "Nothing runs; start the lab with `make up`" in done.stdout
    down = joinlab(env, "lab", "down")
    assert down.returncode == 0 and "no native lab service was running" in down.stdout


def test_a_taken_port_is_named_with_its_variable_and_nothing_starts(tmp_path):
    env = lab_env(tmp_path)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port_of(env, "jupyter")))
        squatter.listen()
        done = joinlab(env, "lab", "up")
    assert done.returncode == 2
    assert f"port {port_of(env, 'jupyter')} (JupyterLab) is taken" in done.stderr
    assert "set LAB_JUPYTER_PORT to a free port" in done.stderr
    assert not list((tmp_path / "lab").glob("run/*.json")) and not (tmp_path / "lab" / "broker.json").exists()
    assert ps_states(env) == {name: "stopped" for name in CORE}


def test_down_ps_and_logs_act_on_the_compose_stack_when_make_up_started_it(tmp_path):
    """`make up` writes $LAB_HOME/stack = compose after compose-up.sh succeeds; a fake docker records calls."""
    env = lab_env(tmp_path)
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "stack").write_text("compose\n")
    fakebin, calls = tmp_path / "bin", tmp_path / "docker.log"
    fakebin.mkdir()
    (fakebin / "docker").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    (fakebin / "docker").chmod(0o755)
    env["PATH"] = f"{fakebin}{os.pathsep}{env['PATH']}"
    assert joinlab(env, "lab", "ps").returncode == 0
    assert joinlab(env, "lab", "logs", "--no-follow", "--service", "kafka").returncode == 0
    assert joinlab(env, "lab", "down", "--volumes").returncode == 0
    assert calls.read_text().splitlines() == ["compose ps", "compose stats --no-stream --format table {{.Name}}\t{{.MemUsage}}",
                                              "compose logs --tail 50 kafka", "compose down -v"]
    assert not (tmp_path / "lab" / "stack").exists()


def test_a_session_takes_spark_remote_then_a_live_native_server_then_one_of_its_own(tmp_path, monkeypatch):
    """joinlab.spark.server(): $SPARK_REMOTE (with its token), else the native lab's Connect server
    while its process runs, else a server started in the process (on $SPARK_MASTER, else local[*])."""
    from joinlab import spark
    from joinlab.stack.services import CONNECT_CLASS
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    for var in ("SPARK_REMOTE", spark.TOKEN_VARIABLE, "SPARK_MASTER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(spark, "embedded", lambda app_name="stream-join-lab": ("sc://localhost:1", "its own"))
    assert spark.server() == ("sc://localhost:1", "its own") and spark.spark_master() == "local[*]"
    state = procs.Service("spark-connect", os.getpid(), CONNECT_CLASS, "", "sc://localhost:7", {"token": "t"})
    procs.save(state)  # a live PID, but not a server: a reused PID must not count
    assert spark.server() == ("sc://localhost:1", "its own")
    procs.save(procs.Service("spark-connect", os.getpid(), Path(sys.executable).name, "", "sc://localhost:7",
                             {"token": "t"}))
    assert spark.server() == ("sc://localhost:7", "t")
    monkeypatch.setenv("SPARK_REMOTE", "sc://elsewhere:15002")
    monkeypatch.setenv(spark.TOKEN_VARIABLE, "theirs")
    assert spark.server() == ("sc://elsewhere:15002", "theirs")
    monkeypatch.setenv("SPARK_MASTER", "local[2]")
    assert spark.spark_master() == "local[2]"


def test_a_server_on_a_local_master_tries_a_failed_task_twice_as_a_cluster_does():
    """Spark's local mode fails a query at its first failed task (a Python worker killed as stuck,
    say); the lab's servers make it two attempts. A master that says its own, or a cluster's, stays."""
    from joinlab import spark
    assert [spark.with_task_retry(m) for m in ("local", "local[2]", "local[*]")] == ["local[1,2]", "local[2,2]",
                                                                                     "local[*,2]"]
    for own in ("local[2,4]", "spark://127.0.0.1:7077", "local-cluster[2,1,1024]"):
        assert spark.with_task_retry(own) == own
    conf = spark.server_conf("local[2]", 15002)
    assert conf["spark.master"] == "local[2,2]" and conf["spark.python.worker.killOnIdleTimeout"] == "true"


def test_the_jvm_options_of_the_memory_budget(monkeypatch):
    """Drivers on a cluster compile with C1 only and keep small heaps; a local driver, which runs
    the tasks, keeps the JVM's own; the lab's JVMs get 2 malloc arenas unless MALLOC_ARENA_MAX says."""
    from joinlab import config, spark
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert config.jvm_env({})["MALLOC_ARENA_MAX"] == "2"
    assert config.jvm_env({"MALLOC_ARENA_MAX": "8"})["MALLOC_ARENA_MAX"] == "8"
    assert spark.CLUSTER_DRIVER_OPTIONS in spark.driver_java_options("spark://127.0.0.1:7077")
    assert spark.CLUSTER_JVM_OPTIONS in spark.driver_java_options("spark://127.0.0.1:7077")
    local = spark.driver_java_options("local[2]")
    assert "TieredStopAtLevel" not in local and "HeapFreeRatio" not in local
    assert spark.memory_conf()["spark.executorEnv.MALLOC_ARENA_MAX"] == "2"


def test_a_missing_token_is_generated_into_env_file_owner_only(tmp_path, monkeypatch):
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    monkeypatch.setenv("LAB_ENV_FILE", str(tmp_path / ".env"))
    token = settings.token("JUPYTER_TOKEN")
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    text = (tmp_path / ".env").read_text()
    assert f"\nJUPYTER_TOKEN={token}\n" in text and "GEN_RATE=50" in text  # .env.example kept
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert settings.token("JUPYTER_TOKEN") == token
    monkeypatch.setenv("JUPYTER_TOKEN", "from-env")
    assert settings.token("JUPYTER_TOKEN") == "from-env"


# --- One real stack ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    home = tmp_path_factory.mktemp("native-stack")
    env = lab_env(home)
    shutil.copytree(ROOT / "notebooks", home / "notebooks")  # what a participant finds in JupyterLab
    began = time.monotonic()
    done = joinlab(env, "lab", "up", timeout=420)
    up_s = time.monotonic() - began
    try:
        assert done.returncode == 0, f"lab up failed:\n{done.stdout}\n{done.stderr}"
        token = re.search(r"^JUPYTER_TOKEN=(\w+)$", (home / ".env").read_text(), re.M).group(1)
        print(f"\nnative stack healthy after {up_s:.1f} s (lab up wall time)")
        yield SimpleNamespace(env=env, home=home / "lab", out=done.stdout, token=token,
                              bootstrap=f"127.0.0.1:{port_of(env, 'broker')}",
                              master_ui=f"http://127.0.0.1:{port_of(env, 'master-ui')}",
                              connect=f"sc://localhost:{port_of(env, 'connect')}",
                              connect_ui=f"http://127.0.0.1:{port_of(env, 'connect-ui')}",
                              jupyter=f"http://127.0.0.1:{port_of(env, 'jupyter')}",
                              lookup=f"http://127.0.0.1:{port_of(env, 'lookup')}")
    finally:
        joinlab(env, "lab", "down", timeout=120)  # idempotent: the last test has done it already


def stack_pids(home: Path) -> set[int]:
    """Every process of the stack: the services, their groups and all descendants."""
    leaders = [json.loads(p.read_text())["pid"] for p in (home / "run").glob("*.json")]
    if (home / "broker.json").exists():
        leaders.append(json.loads((home / "broker.json").read_text())["pid"])
    return procs.tree(leaders)


def master_json(stack) -> dict:
    from joinlab.stack.services import master_state
    return master_state(stack.master_ui)


@pytest.mark.spark
def test_up_starts_every_service_healthy_and_prints_the_urls(stack):
    assert ps_states(stack.env) == {name: "healthy" for name in CORE}
    workers = [w for w in master_json(stack)["workers"] if w["state"] == "ALIVE"]
    assert len(workers) == 1 and workers[0]["host"] == "127.0.0.1"
    env = stack.env
    for shown in (stack.bootstrap, f"spark://127.0.0.1:{port_of(env, 'master')}", stack.master_ui,
                  f"http://127.0.0.1:{port_of(env, 'worker-ui')}", f"{stack.jupyter}/lab?token={stack.token}",
                  stack.lookup, str(stack.home / "run" / "lookup.token"), f"joinlab run {next(iter(PATTERNS))}",
                  f"Spark Connect     {stack.connect}", f"web UI of every job {stack.connect_ui}",
                  "Run a job on the server:", "warmed up: every pattern's job once"):
        assert shown in stack.out
    assert "4041" not in stack.out and "Run a job on the master" not in stack.out
    from joinlab.stack.lab import WARM_UP
    from joinlab.topics import list_topics
    assert not [t.topic for t in list_topics(stack.bootstrap) if t.topic.startswith(WARM_UP)]  # the warm-up's, gone
    # the one application on the master: the Connect server, with every core of the worker
    apps = master_json(stack)["activeapps"]
    assert [(a["name"], a["cores"]) for a in apps] == [("stream-join-lab", workers[0]["cores"])], apps
    assert stat.S_IMODE((stack.home.parent / ".env").stat().st_mode) == 0o600
    jupyter_pid = json.loads((stack.home / "run" / "jupyter.json").read_text())["pid"]
    cmdline = subprocess.run(["ps", "-o", "args=", "-p", str(jupyter_pid)], capture_output=True, text=True).stdout
    assert "jupyterlab" in cmdline and stack.token not in cmdline  # not readable by other users via ps
    connect_token = re.search(r"^SPARK_CONNECT_AUTHENTICATE_TOKEN=(\w+)$", (stack.home.parent / ".env").read_text(),
                              re.M).group(1)
    connect_pids = procs.tree([json.loads((stack.home / "run" / "spark-connect.json").read_text())["pid"]])
    assert not [p for p in connect_pids if connect_token in _cmdline(p)]  # nor the server's


def _outward_ip() -> str | None:
    for probe in ("192.0.2.1", "10.255.255.255", "8.8.8.8"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((probe, 9))  # UDP: picks the route's source address, sends nothing
            except OSError:
                continue
            address = sock.getsockname()[0]
            if not address.startswith("127."):
                return address
    return None


LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$")


@pytest.mark.spark
def test_every_listener_is_bound_to_loopback_only(stack):
    pids = stack_pids(stack.home)
    if shutil.which("ss"):
        listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
        ours = [line.split()[3] for line in listing.splitlines()
                if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids]
        assert len(ours) >= 6, f"expected the stack's listeners in `ss -ltnp`, found {ours}"
        assert [a for a in ours if not LOOPBACK.match(a)] == []
    address = _outward_ip()
    if address is None:
        pytest.skip("no non-loopback address to try")
    for key in PORT_VARS:
        with pytest.raises(OSError):
            socket.create_connection((address, port_of(stack.env, key)), timeout=2).close()


@pytest.mark.spark
def test_jupyterlab_rejects_requests_without_the_token(stack):
    from joinlab.stack.services import http
    assert http(f"{stack.jupyter}/api/status")[0] == 403
    assert http(f"{stack.jupyter}/api/status", token="wrong")[0] == 403
    assert http(f"{stack.jupyter}/lab")[0] == 302  # to the login page
    status, body = http(f"{stack.jupyter}/api/status", token=stack.token)
    assert status == 200 and "started" in json.loads(body)
    assert http(f"{stack.jupyter}/lab?token={stack.token}")[0] == 200


def _jupyter(stack, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(f"{stack.jupyter}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {stack.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else {}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.spark
def test_jupyterlab_is_set_up_for_a_room(stack):
    """No news pop-up or update check, the README as the first page, a kernel that imports the lab."""
    from joinlab.stack.services import http
    status, body = http(f"{stack.jupyter}/lab/api/settings/@jupyterlab/apputils-extension:notification",
                        token=stack.token)
    notification = json.loads(body)
    assert status == 200
    defaults = notification["schema"]["properties"]
    assert defaults["fetchNews"]["default"] == "false" and defaults["checkForUpdates"]["default"] is False
    status, body = http(f"{stack.jupyter}/lab/api/workspaces/default", token=stack.token)
    layout = json.loads(body)["data"]["layout-restorer:data"]
    assert status == 200 and layout["main"]["current"] == "markdownviewer-widget:README.md"
    kernel = _jupyter(stack, "POST", "/api/kernels", {})["id"]  # the default kernel, as a new notebook gets
    try:
        jupyter_pid = json.loads((stack.home / "run" / "jupyter.json").read_text())["pid"]
        pid = wait_for(lambda: next((p for p in procs.tree([jupyter_pid]) if kernel in _cmdline(p)), None), 60,
                       "the kernel's process")
        python = _cmdline(pid).split("\0")[0]  # as started (the venv's python is a symlink: argv[0] counts)
        assert Path(python).is_absolute(), python
        kernel_env = dict(line.split("=", 1) for line in
                          Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in line)
        done = subprocess.run([python, "-c", "import joinlab.notebook, jobs.tweet_views.job; print(joinlab.notebook.Lab)"],
                              cwd=stack.home.parent / "notebooks", env=kernel_env, capture_output=True, text=True,
                              timeout=120)
    finally:
        _jupyter(stack, "DELETE", f"/api/kernels/{kernel}")
    assert done.returncode == 0 and "Lab" in done.stdout, done.stderr[-2000:]


@pytest.mark.spark
def test_a_participant_sees_the_readme_and_no_news_prompt_in_a_real_browser(stack):
    """Headless Chromium opens the URL `make up` prints. Without the lab's defaults JupyterLab shows
    the news question about a second after the first page (measured), so a few seconds without it
    after the README has rendered is the check."""
    from tests import chromium
    problem = chromium.problem()
    if problem:
        pytest.skip(f"needs a headless browser: {problem}")
    url = re.search(r"JupyterLab\s+(\S+)", stack.out).group(1)
    with chromium.open_page(url) as page:
        heading = wait_for(lambda: page.evaluate(
            "(document.querySelector('.jp-MarkdownViewer .jp-RenderedMarkdown h1') || {}).textContent"),
            180, "the README rendered in JupyterLab")
        assert heading.startswith("Notebooks")
        listed = page.evaluate("document.querySelector('.jp-DirListing-content').innerText")
        assert "tweet_views.ipynb" in listed and "lottery.ipynb" in listed
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert "Jupyter news" not in page.evaluate("document.body.innerText")
            time.sleep(0.25)


@pytest.mark.spark
def test_the_lookup_service_refuses_a_request_without_its_token(stack):
    from joinlab.lookup import LookupSettings, lookup_sessions
    from joinlab.stack.services import http
    assert http(f"{stack.lookup}/sessions/s1")[0] == 401
    status, body = http(f"{stack.lookup}/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    token_file = stack.home / "run" / "lookup.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    lookup_pid = json.loads((stack.home / "run" / "lookup.json").read_text())["pid"]
    cmdline = subprocess.run(["ps", "-o", "args=", "-p", str(lookup_pid)], capture_output=True, text=True).stdout
    assert "joinlab.lookup" in cmdline and token_file.read_text().strip() not in cmdline
    # What the job does: settings from the stack's environment (URL from LAB_LOOKUP_PORT, token from the file).
    lookup = LookupSettings.from_env({**stack.env, "LAB_HOME": str(stack.home)})
    assert lookup.url == stack.lookup
    assert lookup_sessions(["no-such-session"], lookup)["no-such-session"].error == "session not found (HTTP 404)"
    wrong = LookupSettings(stack.lookup, "wrong")
    assert "lookup unauthorized (HTTP 401)" in lookup_sessions(["s1"], wrong)["s1"].error


@pytest.mark.spark
def test_a_second_up_reports_what_already_runs(stack):
    before = sorted(p.read_text() for p in (stack.home / "run").glob("*.pid"))
    done = joinlab(stack.env, "lab", "up")
    assert done.returncode == 0, done.stderr
    for name in CORE:
        assert re.search(rf"^\s+{name}\s+already running \(pid \d+\)$", done.stdout, re.M), done.stdout
    assert sorted(p.read_text() for p in (stack.home / "run").glob("*.pid")) == before
    assert f"{stack.jupyter}/lab?token={stack.token}" in done.stdout


def java_children(pid: int) -> set[int]:
    """The JVMs under `pid` (its process tree), by their executable's name."""
    return {p for p in procs.tree([pid]) - {pid} if Path(_cmdline(p).split("\0")[0]).name == "java"}


def server_api(stack, path: str):
    """The Connect server's web UI's REST API: its one application's `path` (JSON)."""
    with urllib.request.urlopen(f"{stack.connect_ui}/api/v1/applications", timeout=10) as answer:
        app = json.load(answer)[0]["id"]
    with urllib.request.urlopen(f"{stack.connect_ui}/api/v1/applications/{app}/{path}", timeout=10) as answer:
        return json.load(answer)


def executor_tasks(stack) -> dict[str, int]:
    """The server's executors (its driver not counted): id -> tasks completed."""
    return {e["id"]: e["completedTasks"] for e in server_api(stack, "executors") if e["id"] != "driver"}


@pytest.mark.spark
def test_a_job_is_a_client_of_the_labs_connect_server(stack):
    """`joinlab run` with the stack's environment (no SPARK_REMOTE, no SPARK_MASTER) finds the lab's
    Connect server and runs its query there: no JVM of its own, no application of its own on the
    master (the server's is the only one); the server's executor, on the worker, runs the
    transformWithState Python with the lab's modules importable."""
    from generators.tweet_views import generate
    from joinlab.generate import send
    from joinlab.verify import verify
    send(stack.bootstrap, generate(11, 300), progress=False)
    tasks_before = executor_tasks(stack)
    assert tasks_before, "the Connect server has no executor"
    jvms: set[int] = set()
    log = stack.home / "job-tweet-views.log"
    with open(log, "wb") as out:
        job = subprocess.Popen([sys.executable, "-m", "joinlab", "run", "tweet-views", "--available-now"],
                               env=stack.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while job.poll() is None:  # watched while it runs: a JVM of the client's would be its child
            jvms |= java_children(job.pid)
            time.sleep(0.2)
    finally:
        if job.poll() is None:
            job.kill()
        job.wait(timeout=420)
    assert job.returncode == 0, log.read_text()[-3000:]
    assert not jvms, f"`joinlab run` started JVMs of its own: {[_cmdline(p)[:200] for p in jvms]}"
    assert verify("tweet-views", stack.bootstrap).ok
    state = master_json(stack)
    assert [a["name"] for a in state["activeapps"]] == ["stream-join-lab"], state["activeapps"]
    assert not state.get("completedapps"), state["completedapps"]  # no job started an application of its own
    tasks_after = executor_tasks(stack)
    assert sum(tasks_after.values()) > sum(tasks_before.values()), (tasks_before, tasks_after)


@pytest.mark.spark
def test_a_generator_runs_in_the_background_and_logs(stack):
    done = joinlab(stack.env, "lab", "generate", "tweet-views", "--rate", "1000", "--count", "50")
    assert done.returncode == 0, done.stderr
    assert "gen-tweet-views" in done.stdout
    wait_for(lambda: ps_states(stack.env).get("gen-tweet-views") == "exited", 60, "the generator to finish")
    logs = joinlab(stack.env, "lab", "logs", "--no-follow", "--service", "gen-tweet-views")
    assert logs.returncode == 0 and "tweet-views: sent" in logs.stdout, logs.stdout + logs.stderr
    unknown = joinlab(stack.env, "lab", "logs", "--no-follow", "--service", "nope")
    assert unknown.returncode == 2 and "spark-master" in unknown.stderr


SPARK_JVM = re.compile(r"SparkSubmit|CoarseGrainedExecutorBackend|deploy\.master\.Master|deploy\.worker\.Worker")


class MemoryWatch:
    """The lab's memory budget (docs/operations.md#memory): the PSS of every process of the stack,
    the terminal job and the notebook's kernel (Connect clients, without a JVM), summed as
    perf.memory sums it, sampled every second while the notebook runs; `check()` fails when the
    largest sum exceeds perf.memory.BUDGET, with the table of that sample, when a client runs a
    JVM (a driver besides the server's), or when a Spark JVM seen runs without the shared class
    archive (joinlab.class_archive)."""

    def __init__(self, stack, job_pid: int, kernel_manager):
        import threading
        self.stack, self.job_pid, self.km = stack, job_pid, kernel_manager
        self.peak: dict = {}
        self.peak_rows: list = []  # the largest sample's processes (perf.memory.processes)
        self.spark_jvms: dict[int, tuple[str, bool]] = {}  # on the stack: pid -> (its kind, whether it maps the class archive)
        self.client_jvms: dict[int, str] = {}  # any JVM under the job or the kernel: pid -> its command line
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _extra(self) -> dict[str, int]:
        extra = {"job": self.job_pid}
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        if process is not None:
            extra["notebook kernel"] = process.pid
        return extra

    def _watch(self) -> None:
        from perf.memory import leaders, own_memory, processes, summed, total
        archive = str(class_archive.path())
        while not self.done.wait(1.0):
            rows = processes(self.stack.home, self._extra())
            table = summed(rows)
            if not self.peak or total(table)[1] > total(self.peak)[1]:
                self.peak, self.peak_rows = table, rows
            for client in self._extra().values():
                for pid in java_children(client):
                    self.client_jvms[pid] = _cmdline(pid).replace("\0", " ")[:300]
            for pid in own_memory(procs.tree(list(leaders(self.stack.home, self._extra()).values()))):
                command = _cmdline(pid)
                what = SPARK_JVM.search(command)
                # a JVM of Spark's (not spark-class's shell, nor its launcher that writes the java command), on the
                # stack: a local session runs without the archive
                if (what and Path(command.split("\0")[0]).name == "java" and "launcher.Main" not in command
                        and "spark.master=local" not in command):
                    with contextlib.suppress(OSError):  # ended since
                        # seen again until it maps the archive: a JVM maps it within its first moments
                        mapped = archive in Path(f"/proc/{pid}/maps").read_text()
                        self.spark_jvms[pid] = (what.group(), mapped or self.spark_jvms.get(pid, ("", False))[1])

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(timeout=30)

    def jvms(self) -> str:
        """The largest sample's JVMs one by one, an executor with its application: which JVMs the sum holds."""
        lines = ["| JVM | pid | application | RSS / PSS, MiB |", "|---|---:|---|---:|"]
        for key, pid, cmd, rss, pss in self.peak_rows:
            if SPARK_JVM.search(cmd):
                app = re.search(r"--app-id (\S+)", cmd)
                lines.append(f"| {key} | {pid} | {app.group(1) if app else ''} | {rss >> 20} / {pss >> 20} |")
        return "\n".join(lines)

    def check(self) -> None:
        from joinlab.spark import CLUSTER_DRIVER_OPTIONS
        from perf.memory import BUDGET, gib, markdown, own_memory, total
        assert not self.client_jvms, f"a client (the terminal job, the notebook's kernel) ran a JVM: {self.client_jvms}"
        server = json.loads((self.stack.home / "run" / "spark-connect.json").read_text())["pid"]
        drivers = [p for p in own_memory(procs.tree([server])) if "SparkSubmit" in _cmdline(p)
                   and Path(_cmdline(p).split("\0")[0]).name == "java"]
        assert len(drivers) == 1 and CLUSTER_DRIVER_OPTIONS in _cmdline(drivers[0]).replace("\0", " "), \
            "the Connect server's driver JVM runs without the cluster driver's options"
        environ = Path(f"/proc/{drivers[0]}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_ARENA_MAX=2" in environ, "the server's driver JVM runs with glibc's own malloc arenas"
        # the master, the worker, the Connect server and its executor(s): the one driver is the server's
        kinds = sorted(what for what, _ in self.spark_jvms.values())
        assert [pid for pid, (what, _) in self.spark_jvms.items() if what == "SparkSubmit"] == drivers, \
            f"a SparkSubmit JVM besides the server's: {self.spark_jvms}"
        assert {"deploy.master.Master", "deploy.worker.Worker", "SparkSubmit", "CoarseGrainedExecutorBackend"} \
            == set(kinds) and kinds.count("deploy.master.Master") == kinds.count("deploy.worker.Worker") == 1, \
            f"a master, a worker, the Connect server and its executor(s): {self.spark_jvms}"
        unshared = [(pid, what, _cmdline(pid)[:300]) for pid, (what, mapped) in self.spark_jvms.items() if not mapped]
        assert not unshared, f"Spark JVMs without the class archive {class_archive.path()}: {unshared}"
        assert self.peak, "no sample of the lab's memory was taken"
        assert "spark-connect driver JVM" in self.peak, self.peak
        assert not [key for key in self.peak if key.startswith(("job", "notebook kernel")) and "JVM" in key], self.peak
        assert any(key.startswith("notebook kernel") for key in self.peak), self.peak
        rss, pss = total(self.peak)
        table = markdown({"c": self.peak}) + "\n\n" + self.jvms()
        print(f"\nthe lab's memory with a job, a generator and a notebook (largest sample): PSS {gib(pss)}, "
              f"RSS {gib(rss)}\n{table}")
        assert pss <= BUDGET, (f"the lab's memory with a job, a generator and a notebook running: PSS {gib(pss)}, over "
                               f"the budget of {gib(BUDGET)} (docs/operations.md#memory)\n{table}")


@pytest.fixture(scope="class")
def walk(stack, tmp_path_factory):
    """The workshop page walked on the stack (tests/workshop.py): its jobs stopped at the end."""
    from tests.workshop import Walk
    walk = Walk(stack, tmp_path_factory.mktemp("workshop"))
    try:
        yield walk
    finally:
        walk.close()


def as_on_the_page(walk, *names: str) -> None:
    """The page's output blocks `names` have the shape of what the walk's run printed."""
    from tests.workshop import PAGE, blocks, differences
    page = blocks(PAGE.read_text())
    problems = differences({n: page[n] for n in names if n in page}, {n: walk.outputs[n] for n in names})
    assert not problems, ("docs/workshop.md does not show what the run printed (`.venv/bin/python -m "
                          "tests.workshop` writes the run's outputs into it):\n" + "\n".join(problems))


class TestTheWorkshop:
    """The workshop rehearsed (docs/workshop.md, issue 34): its sections in order on the stack, with
    its commands (generators at its rate, `joinlab run PATTERN --reset` stopped with Ctrl-C, the
    topics, `joinlab state`), each output the page shows checked against the run's, and the room's
    cases of its 0:10 part: a notebook beside the running job, generators started again (the last
    with --seed, which mixes a seed's events into the ids other events hold: so it comes last).
    `make down`, its wrap-up, is test_down_stops_everything_and_frees_the_ports."""

    @pytest.mark.spark
    def test_0000_start_the_lab(self, walk):
        walk.start_the_lab()
        as_on_the_page(walk, "lab-up")

    @pytest.mark.spark
    def test_0010_tweet_views(self, walk):
        walk.tweet_views_job = walk.tweet_views()
        as_on_the_page(walk, "tweet-views-run", "tweet-views-tail", "tweet-views-dead-letter")

    @pytest.mark.spark
    @pytest.mark.timeout(1500)
    def test_0010_a_notebook_beside_the_job(self, stack, walk, tmp_path, request):
        """tweet_views.ipynb executed in a kernel of the stack's environment (a client of the lab's
        Connect server beside the terminal's job) while a background generator keeps sending."""
        import nbformat
        from jupyter_core.utils import run_sync
        from nbclient import NotebookClient

        from tests.test_notebooks import NOTEBOOKS_DIR, SMALL, _fresh_start, _kernel_manager, _text_outputs
        background = joinlab(stack.env, "lab", "generate", "tweet-views", "--rate", "20")
        assert background.returncode == 0, background.stderr
        # nbclient leaves a kernel it did not start running (here until pytest exits)
        km = _kernel_manager(tmp_path / "kernels")
        try:
            nb = nbformat.read(NOTEBOOKS_DIR / "tweet_views.ipynb", as_version=4)
            env = {**stack.env, **SMALL, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
            nb.cells.insert(0, _fresh_start(env))
            client = NotebookClient(nb, km=km, timeout=900, startup_timeout=120,
                                    resources={"metadata": {"path": str(NOTEBOOKS_DIR)}})
            with MemoryWatch(stack, walk.tweet_views_job.process.pid, km) as memory_budget:
                try:
                    client.execute(env=env)
                finally:
                    nbformat.write(nb, tmp_path / "tweet_views.ipynb")
            assert "0 mismatches (OK)" in _text_outputs(nb)
            # shown in make test's output, passed or not: the figure's margin, run by run
            with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
                memory_budget.check()
            assert ps_states(stack.env)["gen-tweet-views"] == "running", "the generator stopped before the notebook"
            assert walk.tweet_views_job.process.poll() is None
            # `lab ps` shows each service's memory: its whole process tree's (the worker's executors too)
            from joinlab.stack.procs import resident
            memory = ps_memory(stack.env)
            assert set(memory) >= set(CORE) | {"gen-tweet-views"}
            worker_pid, worker_tree = memory["spark-worker"]
            assert worker_tree > 1.5 * resident({worker_pid}), memory
        finally:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
            joinlab(stack.env, "lab", "down", "gen-tweet-views")

    @pytest.mark.spark
    def test_0010_a_generator_started_again(self, walk):
        walk.generator_again(walk.tweet_views_job)
        as_on_the_page(walk, "generator-again", "seed-again")

    @pytest.mark.spark
    def test_0030_car_pollution(self, walk):
        walk.car_pollution()
        as_on_the_page(walk, "car-pollution-run")

    @pytest.mark.spark
    def test_0050_lottery(self, walk):
        walk.lottery()
        as_on_the_page(walk, "lottery-run")

    @pytest.mark.spark
    def test_0110_money_enrichment(self, walk):
        walk.money_enrichment()
        as_on_the_page(walk, "money-enrichment-run", "money-enrichment-state")

    def test_every_output_on_the_page_came_from_the_walk(self, walk):
        from tests.workshop import PAGE, blocks
        assert sorted(blocks(PAGE.read_text())) == sorted(walk.outputs)


@pytest.mark.spark
def test_down_stops_everything_and_frees_the_ports(stack):
    pids = stack_pids(stack.home)
    assert len(pids) >= 4
    began = time.monotonic()
    done = joinlab(stack.env, "lab", "down")
    print(f"\nlab down took {time.monotonic() - began:.1f} s")
    assert done.returncode == 0, done.stderr
    alive = subprocess.run(["ps", "-o", "pid=,stat=", "-p", ",".join(map(str, pids))], capture_output=True,
                           text=True).stdout.split("\n")
    assert [line for line in alive if line.strip() and "Z" not in line.split()[-1]] == []
    for key in PORT_VARS:
        assert bindable(port_of(stack.env, key)), f"port of {key} still taken after down"
    assert ps_states(stack.env) == {name: "stopped" for name in CORE}
    assert not list((stack.home / "run").iterdir()) and not (stack.home / "stack").exists()
