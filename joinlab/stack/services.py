"""The native stack's services: how each one starts, and how we know it is usable.

A service is healthy when it answers, not when its process exists: the Spark master when its
JSON shows our worker ALIVE, JupyterLab when /api/status answers 200 with the token *and* 403
without it (a Jupyter config that disables the token fails `make up` instead of going unnoticed),
the session lookup service when /health answers *and* a session request without its token gets 401.
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import joinlab.stack.procs as procs
from joinlab import class_archive
from joinlab.config import jvm_env, lab_home, spark_home
from joinlab.lookup.client import health_problem
from joinlab.lookup.config import token_file
from joinlab.patterns import module_name
from joinlab.stack.procs import CONNECT, Service, StackError
from joinlab.stack.settings import HOST, port, setting

MASTER, WORKER, JUPYTER, LOOKUP = "spark-master", "spark-worker", "jupyter", "lookup"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def base_env(python: str = sys.executable) -> dict[str, str]:
    """Every service: absolute LAB_HOME (JupyterLab runs in notebooks/), `python`'s venv first on
    PATH, Python workers on `python` (this interpreter; in a room the participants' one, which
    Spark's user can run), Spark bound to loopback."""
    env = jvm_env()  # Spark's daemons, its server and executors are JVMs
    env.update(LAB_HOME=str(lab_home()), SPARK_HOME=spark_home(), SPARK_LOCAL_IP=HOST, PYSPARK_PYTHON=python,
               PATH=os.pathsep.join([str(Path(python).parent), env.get("PATH", "")]))
    return env


def run_as(env: dict[str, str], user: str | None) -> dict[str, str]:
    """`env` for a service that runs as `user` (in a room, Spark's: joinlab.room.hub.SPARK_USER): its
    own HOME, a folder it owns, rather than the HOME of root who starts it."""
    if user is None:
        return env
    import pwd
    entry = pwd.getpwnam(user)
    kept = {name: value for name, value in env.items() if name not in ROOT_ONLY}
    return {**kept, "HOME": entry.pw_dir, "USER": user, "LOGNAME": user}


# What root's environment may hold that Spark's user must not (participants' queries run as it):
# the room's passwords and the instructor's JupyterLab token.
ROOT_ONLY = ("LAB_ROOM_PASSWORD", "LAB_ROOM_ADMIN_PASSWORD", "JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE")


def http(url: str, token: str | None = None, timeout_s: float = 2.0) -> tuple[int, bytes]:
    """(status, body); status 0 when nothing answers. Redirects are not followed."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (OSError, ValueError):
        return 0, b""


def master_state(ui_url: str) -> dict:
    """The master's status (its web UI's /json/); {} when it does not answer."""
    status, body = http(f"{ui_url}/json/")
    try:
        return json.loads(body) if status == 200 else {}
    except ValueError:
        return {}


def wait_healthy(service: Service, timeout_s: float) -> None:
    """Poll the service's health check until true; fail early if the process exits, late with the log's last lines."""
    check, what = HEALTH[service.name]
    deadline = time.monotonic() + timeout_s
    while not check(service):
        exited = not procs.is_running(service)
        if exited or time.monotonic() > deadline:
            why = "exited" if exited else f"was not {what} within {timeout_s:.0f}s"
            raise StackError(f"{service.name} {why}. Its log, {service.log}, ends with:\n{tail(service.log, 15)}")
        time.sleep(0.2)


def tail(path: str, lines: int, indent: str = "  ") -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"{indent}(no log)"
    return "\n".join(indent + line for line in text[-lines:])


def daemon_env(python: str = sys.executable) -> dict[str, str]:
    """The master's and the worker's: they schedule and serve a UI, they compute nothing, so a small
    heap that starts small, serial GC and C1 only, and Spark's classes from the shared archive
    (joinlab.class_archive; docs/operations.md#memory)."""
    options = setting("SPARK_DAEMON_JAVA_OPTS", "-Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    return {**base_env(python), "SPARK_DAEMON_MEMORY": setting("SPARK_DAEMON_MEMORY", "192m"),
            "SPARK_DAEMON_JAVA_OPTS": " ".join(filter(None, [options, class_archive.java_options()]))}


def start_master() -> Service:
    rpc, ui = port("master"), port("master-ui")
    env = daemon_env()
    # No REST submission server (an extra port nobody uses here); a taken port fails instead of
    # silently moving; apps without spark.cores.max get half the worker (docs/operations.md says why).
    env["SPARK_MASTER_OPTS"] = " ".join([
        env.get("SPARK_MASTER_OPTS", ""), "-Dspark.master.rest.enabled=false", "-Dspark.port.maxRetries=0",
        "-Dspark.ui.killEnabled=false",  # nor the room's server from the master's page
        f"-Dspark.deploy.defaultCores={setting('LAB_SPARK_APP_CORES', str(max(1, cores() // 2)))}"]).strip()
    cmd = [f"{spark_home()}/bin/spark-class", MASTER_CLASS, "--host", HOST, "--port", str(rpc), "--webui-port", str(ui)]
    return procs.spawn(MASTER, cmd, MASTER_CLASS, env, url=f"spark://{HOST}:{rpc}", extra={"ui": f"http://{HOST}:{ui}"})


def cores() -> int:
    return int(setting("SPARK_WORKER_CORES", str(os.cpu_count() or 2)))


def start_worker(master: Service, user: str | None = None, python: str = sys.executable) -> Service:
    """The worker, and so every executor and every Python worker, where participants' code runs: as
    `user` in a room (its work folder handed to it)."""
    ui = port("worker-ui")
    work = lab_home() / "spark-work"
    work.mkdir(exist_ok=True)
    if user:
        import shutil
        shutil.chown(work, user, user)
    env = run_as(daemon_env(python), user)
    env["SPARK_WORKER_OPTS"] = (env.get("SPARK_WORKER_OPTS", "") + " -Dspark.port.maxRetries=0").strip()
    cmd = [f"{spark_home()}/bin/spark-class", WORKER_CLASS, master.url, "--host", HOST, "--webui-port", str(ui),
           "--cores", str(cores()), "--memory", setting("SPARK_WORKER_MEMORY", "1g"), "--work-dir", str(work)]
    return procs.spawn(WORKER, cmd, WORKER_CLASS, env, url=f"http://{HOST}:{ui}",
                       extra={"master_ui": master.extra["ui"], "work_dir": str(work)}, user=user)


def worker_registered(worker: Service) -> bool:
    """The master lists an ALIVE worker whose web UI is this worker's (old DEAD entries linger)."""
    state = master_state(worker.extra["master_ui"])
    ui_port = worker.url.rsplit(":", 1)[1]
    return any(w.get("state") == "ALIVE" and str(w.get("webuiaddress", "")).endswith(f":{ui_port}")
               for w in state.get("workers", []))


def connect_command(master: str, number: int, ui: int, host: str = HOST) -> list[str]:
    """spark-submit of the lab's Spark Connect server (Spark's own, `sbin/start-connect-server.sh`'s
    class) on `master`, for clients on `host`:`number`, its web UI on `ui`: the native stack's
    (start_connect) and the Compose stack's (joinlab.stack.connect_server), so both run one
    definition. One application for the whole room: every core of the worker (an application gets
    half by default, spark.deploy.defaultCores). No token here: it is read from the server's
    environment, never its command line (`ps` shows that to all)."""
    from joinlab.spark import server_conf
    conf = {**server_conf(master, number, host), "spark.cores.max": str(cores()), "spark.ui.port": str(ui),
            "spark.ui.killEnabled": "false",  # no client of the room stops another's query from a web page
            "spark.port.maxRetries": "0"}
    return [f"{spark_home()}/bin/spark-submit", "--class", CONNECT_CLASS, "--name", "stream-join-lab",
            *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]]


def start_connect(master: Service, token: str, user: str | None = None, python: str = sys.executable) -> Service:
    """The lab's Spark Connect server: the one driver every job, notebook and grader of the lab is a
    client of, on the lab's master, its token in its environment; as `user` in a room (a query's
    driver-side Python runs there, and Spark reads the files a query names as this user)."""
    from joinlab.spark import TOKEN_VARIABLE
    number, ui = port("connect"), port("connect-ui")
    env = run_as({**base_env(python), **lookup_env(), TOKEN_VARIABLE: token}, user)  # base_env: malloc arenas too
    return procs.spawn(CONNECT, connect_command(master.url, number, ui), CONNECT_CLASS, env,
                       url=f"sc://localhost:{number}", extra={"token": token, "ui": f"http://{HOST}:{ui}"}, user=user)


def connect_answers(url: str, token: str) -> bool:
    """Whether the server at `url` answers a client with `token`; StackError when it answers one
    without (a server whose token is off fails `make up`, as JupyterLab's does)."""
    from joinlab.spark import ServerError, connect
    try:
        connect(url, token).stop()
    except ServerError:
        return False
    try:
        connect(url, "").stop()
    except ServerError:
        return True
    raise StackError(f"the Spark Connect server at {url} answers without its token; the lab refuses to run that way")


# JupyterLab for a room of participants. Defaults (a participant's own settings still win): no
# pop-up asking about Jupyter news and no update check, each a request to the internet.
JUPYTER_DEFAULTS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
# The first page: the notebooks' README, rendered, beside the file browser. A workspace, not a
# /lab/tree/README.md link (that opens Markdown as source); seeded once, so a participant's layout stays.
START_README = "README.md"  # in the root folder, notebooks/
START_WORKSPACE = {
    "data": {"layout-restorer:data": {
        "main": {"dock": {"type": "tab-area", "currentIndex": 0, "widgets": [f"markdownviewer-widget:{START_README}"]},
                 "current": f"markdownviewer-widget:{START_README}"},
        "left": {"collapsed": False, "visible": True, "current": "filebrowser", "widgets": ["filebrowser"]}},
        f"markdownviewer-widget:{START_README}": {"data": {"path": START_README, "factory": "Markdown Preview"}}},
    "metadata": {"id": "default"}}


def jupyter_folders() -> tuple[Path, Path]:
    """(app settings, workspaces) under LAB_HOME, with JUPYTER_DEFAULTS and the start workspace."""
    from jupyterlab_server.workspaces_handler import WORKSPACE_EXTENSION, slugify
    settings_dir, workspaces = lab_home() / "jupyter" / "settings", lab_home() / "jupyter" / "workspaces"
    for folder in (settings_dir, workspaces):
        folder.mkdir(parents=True, exist_ok=True)
    (settings_dir / "overrides.json").write_text(json.dumps(JUPYTER_DEFAULTS, indent=2) + "\n")
    start = workspaces / (slugify("default") + WORKSPACE_EXTENSION)
    if not start.exists():
        start.write_text(json.dumps(START_WORKSPACE, indent=2) + "\n")
    return settings_dir, workspaces


def start_jupyter(token: str, notebooks: Path) -> Service:
    number = port("jupyter")
    env = {**base_env(), **lookup_env(), "JUPYTER_TOKEN": token}  # by environment: `ps` shows args to all
    env.pop("JUPYTER_TOKEN_FILE", None)
    settings_dir, workspaces = jupyter_folders()
    cmd = [sys.executable, "-m", "jupyterlab", "--ip", HOST, "--port", str(number), "--no-browser",
           "--ServerApp.port_retries=0", f"--ServerApp.root_dir={notebooks}",
           f"--LabApp.app_settings_dir={settings_dir}", f"--LabApp.workspaces_dir={workspaces}"]
    if os.geteuid() == 0:  # JupyterLab refuses root unless told (CI runners, containers)
        cmd.append("--allow-root")
    return procs.spawn(JUPYTER, cmd, "jupyterlab", env, url=f"http://{HOST}:{number}",
                       cwd=str(notebooks), extra={"token": token})


def jupyter_healthy(jupyter: Service) -> bool:
    if http(f"{jupyter.url}/api/status", jupyter.extra["token"])[0] != 200:
        return False
    if http(f"{jupyter.url}/api/status")[0] != 403:
        raise StackError(f"JupyterLab at {jupyter.url} answers without its token: a Jupyter config "
                         "(~/.jupyter/jupyter_server_config.*) disables it; the lab refuses to run that way")
    return True


def lookup_env() -> dict[str, str]:
    """What a client of the lookup service needs (JupyterLab gets it): its URL, and its token when
    one is configured (else clients read the token file the service writes)."""
    token = setting("LAB_LOOKUP_TOKEN", "")
    return {"LAB_LOOKUP_URL": f"http://{HOST}:{port('lookup')}", **({"LAB_LOOKUP_TOKEN": token} if token else {})}


def start_lookup(bootstrap: str) -> Service:
    env = {**base_env(), **lookup_env()}  # LAB_LOOKUP_TOKEN, .env's too: never in `ps` output
    cmd = [sys.executable, "-m", "joinlab.lookup", "--bootstrap", bootstrap, "--port", str(port("lookup"))]
    where = "$LAB_LOOKUP_TOKEN" if env.get("LAB_LOOKUP_TOKEN") else str(token_file(env))
    return procs.spawn(LOOKUP, cmd, "joinlab.lookup", env, url=env["LAB_LOOKUP_URL"], extra={"token_from": where})


# What `make up` waits for and `make ps` calls healthy: each service's check, and what it checks (and
# the room's hub, which joinlab.room.hub adds).
HEALTH = {
    MASTER: (lambda master: master_state(master.extra["ui"]).get("status") == "ALIVE", "answering"),
    WORKER: (worker_registered, "registered with the master (ALIVE)"),
    CONNECT: (lambda server: connect_answers(server.url, server.extra["token"]),
              "answering a client with its token (and refusing one without)"),
    JUPYTER: (jupyter_healthy, "answering /api/status with its token"),
    LOOKUP: (lambda lookup: health_problem(lookup.url, timeout_s=2.0) is None,
             "answering /health, and 401 to a session request without its token"),
}


def gen_name(pattern: str) -> str:
    return f"gen-{pattern}"


def start_generator(pattern: str, bootstrap: str, rate: float, count: int | None, duration: float | None,
                    extra_args: list[str]) -> Service:
    module = f"generators.{module_name(pattern)}"
    size = ["--count", str(count)] if count else ["--duration", str(duration)]
    cmd = [sys.executable, "-m", module, "--rate", str(rate), *size, "--bootstrap", bootstrap, "--no-progress",
           *extra_args]
    return procs.spawn(gen_name(pattern), cmd, module, base_env())
