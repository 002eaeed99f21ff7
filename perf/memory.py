"""The lab's resident memory, every process counted, in three phases:

  (a) idle after the stack is up;
  (b) with a job (`joinlab run tweet-views`) and a generator (tweet views at GEN_RATE events/s);
  (c) and a JupyterLab kernel running the car-pollution notebook's generator and job too.

    .venv/bin/python -m perf.memory             # the native stack, on free ports in a temporary LAB_HOME
    .venv/bin/python -m perf.memory --compose   # the Compose stack, as a project of its own

Native: the processes are the services' process trees (executors and their Python workers under
the worker, kernels and their drivers under JupyterLab) and the job's own; the figures are the sum
of their RSS (pages two processes share, e.g. forked Python workers', count twice: an upper bound)
and of their PSS (shared pages split between their processes: what the machine pays), from /proc; a
child that shares its parent's address space (a JVM's spawn before its exec) is its parent's memory.
Compose: each container's memory as `docker stats` reports it (its cgroup's, page cache left out).
A phase's figure is the largest total sampled while its jobs commit micro-batches (JVMs grow as they
work). The budget is on the PSS: tests/test_lab_stack.py runs the native phases on its stack and
fails when (c)'s exceeds BUDGET.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import os
import platform
import re
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path
from types import SimpleNamespace

import psutil

from joinlab.stack import procs
from tests import test_lab_stack as stack_tests

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 5 << 29  # 2.5 GiB: (c) measured 2.21-2.30 with one Spark server for the room
# A process's part of its service, by its command line.
PARTS = [("executor JVM", "CoarseGrainedExecutorBackend"), ("driver JVM", "SparkSubmit"), ("kernel", "ipykernel"),
         ("Python workers", "joinlab.pyworkers")]
NOTEBOOK = """
from joinlab.notebook import Lab
lab = Lab("car-pollution")
lab.create_topics()
feed = lab.start_generator(count=3000, rate=100)
query = lab.start_job(trigger="2 seconds", max_offsets_per_trigger=1000)
"""


def lab_env(home: Path) -> dict[str, str]:
    """The stack tests' environment for a stack of our own (free ports, its LAB_HOME and .env), with
    the jars `make install` fetched."""
    env = stack_tests.lab_env(home)
    env.setdefault("LAB_JARS", str(ROOT / ".lab" / "jars"))
    return env


joinlab = stack_tests.joinlab


def wait_for(condition, timeout_s: float, what: str, interval_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(interval_s)
    return value


# --- Native: processes ---------------------------------------------------------------------------

def leaders(home: Path, extra: dict[str, int] | None = None) -> dict[str, int]:
    """Service name -> its process: every service with a PID file, the broker, and `extra`."""
    found = {p.stem: json.loads(p.read_text())["pid"] for p in (home / "run").glob("*.json")}
    if (home / "broker.json").exists():
        found["broker"] = json.loads((home / "broker.json").read_text())["pid"]
    return {**found, **(extra or {})}


def _sizes(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes, read at once; (0, 0) for a process that is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    return tuple(int(re.search(rf"^{what}:\s+(\d+) kB", text, re.M).group(1)) * 1024 for what in ("Rss", "Pss"))


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


_LIBC = ctypes.CDLL(None, use_errno=True)
_KCMP = {"x86_64": 312, "aarch64": 272}[platform.machine()]  # kcmp(2)'s syscall number


def same_memory(pid: int, other: int) -> bool:
    """Whether two processes share one address space (kcmp(2), KCMP_VM); False when either is gone."""
    found = _LIBC.syscall(_KCMP, pid, other, 1, 0, 0)
    if found < 0 and ctypes.get_errno() != errno.ESRCH:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return found == 0


def own_memory(pids: set[int]) -> set[int]:
    """`pids` without those that share their parent's address space: a JVM starting a process
    (posix_spawn, a vfork) has, until the child's exec, a child with the JVM's command line whose
    /proc sizes are the JVM's own, so that counting it would count the JVM twice."""
    kept = set()
    for pid in pids:
        with suppress(psutil.Error):
            parent = psutil.Process(pid).ppid()
            if parent in pids and same_memory(parent, pid):
                continue
        kept.add(pid)
    return kept


def processes(home: Path, extra: dict[str, int] | None = None) -> list[tuple[str, int, str, int, int]]:
    """Every process of the lab once, each address space once: ('service part', pid, command line,
    RSS, PSS), sizes in bytes."""
    rows = []
    seen: set[int] = set()
    for name, pid in sorted(leaders(home, extra).items()):
        pids = own_memory(procs.tree([pid])) - seen
        seen |= pids
        for p in sorted(pids):
            cmd, (rss, pss) = command_line(p), _sizes(p)
            key = " ".join([name, next((part for part, marker in PARTS if marker in cmd), "")]).strip()
            rows.append((key, p, cmd, rss, pss))
    return rows


def summed(rows: list[tuple[str, int, str, int, int]]) -> dict[str, tuple[int, int]]:
    """'service part' -> (RSS, PSS) in bytes, summed over `processes()`' rows."""
    table: dict[str, tuple[int, int]] = {}
    for key, _, _, rss, pss in rows:
        old = table.get(key, (0, 0))
        table[key] = (old[0] + rss, old[1] + pss)
    return table


def sample(home: Path, extra: dict[str, int] | None = None) -> dict[str, tuple[int, int]]:
    """'service part' -> (RSS, PSS) in bytes, every process of the lab counted once."""
    return summed(processes(home, extra))


def total(table: dict) -> tuple[int, int]:
    return sum(v[0] for v in table.values()), sum(v[1] for v in table.values())


class Peak:
    """The sample with the largest total seen so far; `sampler()` takes one."""

    def __init__(self, sampler):
        self.sampler, self.table = sampler, {}

    def __call__(self) -> dict:
        table = self.sampler()
        if total(table)[0] > total(self.table)[0]:
            self.table = table
        return self.table


class Kernel:
    """A JupyterLab kernel, started through the REST API as a new notebook's, and run through its
    websocket as JupyterLab's page does (the Jupyter messaging protocol, JSON frames)."""

    def __init__(self, url: str, token: str):
        import websocket
        self.url, self.token, self.session = url, token, uuid.uuid4().hex
        self.id = self._call("POST", "/api/kernels", {})["id"]
        self.ws = websocket.create_connection(f"ws{url[4:]}/api/kernels/{self.id}/channels?token={token}",
                                              timeout=600)

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        return stack_tests._jupyter(SimpleNamespace(jupyter=self.url, token=self.token), method, path, body)

    def run(self, code: str) -> str:
        """The cell's output; AssertionError with its traceback when it fails."""
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "perf", "session": self.session,
                  "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "channel": "shell",
                                 "content": {"code": code, "silent": False, "store_history": False,
                                             "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
                                 "buffers": []}))
        out, status, idle = [], None, False
        while status is None or not idle:  # the reply (shell) and the output (iopub) come in either order
            message = json.loads(self.ws.recv())
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            content, kind = message["content"], message["msg_type"]
            if kind in ("stream", "error", "execute_result"):
                out.append(content.get("text") or "\n".join(content.get("traceback", []))
                           or content.get("data", {}).get("text/plain", ""))
            status = content["status"] if kind == "execute_reply" else status
            idle = idle or (kind == "status" and content["execution_state"] == "idle")
        assert status == "ok", "".join(out)
        return "".join(out)

    def close(self) -> None:
        self.ws.close()
        self._call("DELETE", f"/api/kernels/{self.id}")


def batches(kernel: Kernel) -> int:
    return int(kernel.run("print(len(query.recentProgress))").strip())


@contextmanager
def notebook(jupyter_url: str, token: str):
    """(c)'s kernel with the notebook's generator and job started; stopped and deleted after."""
    kernel = Kernel(jupyter_url, token)
    try:
        kernel.run(NOTEBOOK)
        yield kernel
        kernel.run("lab.stop()")
    finally:
        kernel.close()


def commits(checkpoint: Path) -> int:
    return len(list((checkpoint / "commits").glob("[0-9]*")))


def phases(env: dict, home: Path, jupyter_url: str, token: str, enough: int = 3, log=print,
           during_c=lambda: None) -> dict[str, dict]:
    """The native stack's 'a', 'b', 'c' -> that phase's peak sample; `during_c()` runs at (c)'s peak."""
    found = {"a": Peak(lambda: sample(home))()}
    log(f"(a) idle: {summary(found['a'])}")
    done = joinlab(env, "lab", "generate", "tweet-views", "--duration", "900")
    assert done.returncode == 0, done.stderr
    job_log = home / "memory-job.log"
    with open(job_log, "wb") as out:
        job = subprocess.Popen([sys.executable, "-m", "joinlab", "run", "tweet-views", "--reset", "--quiet"],
                               env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        peak = Peak(lambda: sample(home, {"job": job.pid}))
        wait_for(lambda: peak() and (job.poll() is not None or commits(home / "checkpoints" / "tweet-views") >= enough),
                 600, f"{enough} micro-batches of the job")
        assert job.poll() is None, job_log.read_text()[-3000:]
        found["b"] = peak.table
        log(f"(b) job and generator: {summary(found['b'])}")
        with notebook(jupyter_url, token) as kernel:
            peak = Peak(lambda: sample(home, {"job": job.pid}))
            wait_for(lambda: peak() and batches(kernel) >= enough, 600, f"{enough} micro-batches of the notebook")
            found["c"] = peak.table
            during_c()
        log(f"(c) and a notebook: {summary(found['c'])}")
    finally:
        procs.stop([procs.Service("job", job.pid, "joinlab", str(job_log))])
        joinlab(env, "lab", "down", "gen-tweet-views")
    return found


# --- Compose: containers -------------------------------------------------------------------------

PROJECT = "joinlab-memory"
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "kB": 1000, "MB": 10 ** 6, "GB": 10 ** 9}


def container_sample(compose: list[str]) -> dict[str, tuple[int, int]]:
    """Service -> (memory, memory): `docker stats` of the project's running containers."""
    ids = subprocess.run([*compose, "ps", "-q"], capture_output=True, text=True, check=True).stdout.split()
    lines = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}", *ids],
                           capture_output=True, text=True, check=True).stdout.splitlines() if ids else []
    table = {}
    for line in lines:
        name, used = line.split()[:2]
        number, unit = re.fullmatch(r"([\d.]+)(\w+)", used).groups()
        size = int(float(number) * UNITS[unit])
        table[name.removeprefix(PROJECT + "-").rsplit("-", 1)[0]] = (size, size)
    return table


def compose_phases(compose: list[str], jupyter_url: str, token: str, enough: int = 3, log=print) -> dict[str, dict]:
    """The Compose stack's 'a', 'b', 'c' (it is up) -> that phase's peak sample."""
    def exec_(*args: str, detach: bool = False) -> str:
        return subprocess.run([*compose, "exec", "-T", *(["-d"] if detach else []), "jupyter", *args],
                              capture_output=True, text=True, check=True).stdout

    def job_commits() -> int:
        return int(exec_("sh", "-c", "ls /lab/state/checkpoints/tweet-views/commits 2>/dev/null | wc -l"))
    found = {"a": Peak(lambda: container_sample(compose))()}
    log(f"(a) idle: {summary(found['a'])}")
    subprocess.run([*compose, "--profile", "generators", "up", "-d", "gen-tweet-views"], check=True,
                   capture_output=True)
    exec_("joinlab", "run", "tweet-views", "--reset", "--quiet", detach=True)
    peak = Peak(lambda: container_sample(compose))
    wait_for(lambda: peak() and job_commits() >= enough, 600, f"{enough} micro-batches of the job")
    found["b"] = peak.table
    log(f"(b) job and generator: {summary(found['b'])}")
    with notebook(jupyter_url, token) as kernel:
        peak = Peak(lambda: container_sample(compose))
        wait_for(lambda: peak() and batches(kernel) >= enough, 600, f"{enough} micro-batches of the notebook")
        found["c"] = peak.table
    log(f"(c) and a notebook: {summary(found['c'])}")
    return found


# --- Report --------------------------------------------------------------------------------------

def gib(size: int) -> str:
    return f"{size / (1 << 30):.2f} GiB"


def summary(table: dict) -> str:
    rss, pss = total(table)
    return f"RSS {gib(rss)}, PSS {gib(pss)}"


def markdown(found: dict[str, dict], both: bool = True) -> str:
    """A table of MiB: a row per process (or container), a column per phase."""
    def cell(value: tuple[int, int] | None) -> str:
        return "" if value is None else " / ".join(f"{v / (1 << 20):.0f}" for v in (value if both else value[:1]))
    heading = " / PSS" if both else ""
    lines = ["| process | " + " | ".join(f"({p}) RSS{heading}, MiB" for p in found) + " |",
             "|---|" + "---:|" * len(found)]
    for key in sorted({k for table in found.values() for k in table}):
        lines.append(f"| {key} | " + " | ".join(cell(found[p].get(key)) for p in found) + " |")
    lines.append("| **total** | " + " | ".join(cell(total(found[p])) for p in found) + " |")
    return "\n".join(lines)


def native() -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="joinlab-memory-") as tmp:
        home = Path(tmp)
        env = lab_env(home)
        (home / "notebooks").mkdir()
        done = joinlab(env, "lab", "up", timeout=420)
        try:
            assert done.returncode == 0, done.stdout + done.stderr
            token = re.search(r"^JUPYTER_TOKEN=(\w+)$", (home / ".env").read_text(), re.M).group(1)
            return phases(env, home / "lab", f"http://127.0.0.1:{env['LAB_JUPYTER_PORT']}", token)
        finally:
            print(joinlab(env, "lab", "down").stdout)


def compose(files: list[str]) -> dict[str, dict]:
    """A project of its own (never the user's `make up` stack; the same published ports)."""
    with tempfile.TemporaryDirectory(prefix="joinlab-memory-") as tmp:
        token = secrets.token_hex(16)
        (Path(tmp) / "env").write_text(f"JUPYTER_TOKEN={token}\n"
                                       f"SPARK_CONNECT_AUTHENTICATE_TOKEN={secrets.token_hex(16)}\n")
        command = ["docker", "compose", "--project-name", PROJECT, "--project-directory", str(ROOT),
                   *[arg for f in files for arg in ("-f", f)], "--env-file", str(Path(tmp) / "env")]
        try:
            subprocess.run([*command, "up", "-d", "--wait"], check=True)
            jupyter = subprocess.run([*command, "port", "jupyter", "8888"], capture_output=True, text=True,
                                     check=True).stdout.strip()
            return compose_phases(command, f"http://{jupyter}", token)
        finally:
            subprocess.run([*command, "--profile", "generators", "down", "--volumes", "--timeout", "20"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compose", action="store_true", help="the Compose stack instead of the native one")
    parser.add_argument("-f", "--file", action="append", help="Compose files (default: docker-compose.yml); "
                        "e.g. -f docker-compose.yml -f docker-compose.no-registry.yml")
    args = parser.parse_args()
    found = compose(args.file or ["docker-compose.yml"]) if args.compose else native()
    print(markdown(found, both=not args.compose))
    print(f"budget of (c): {gib(BUDGET)}" + ("" if args.compose else " PSS"))
    return 0 if total(found["c"])[1] <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
