"""The native stack's processes: a PID file per service, liveness, and stopping a whole tree.

Why it is careful: a PID file outlives its process, and PIDs get reused, so a service counts as
alive only while a process with that PID still has the service's marker in its command line.
Stopping signals the process group (each service starts in its own session) *and* every
descendant seen before the signal, because JupyterLab starts kernels in sessions of their own.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from joinlab.config import lab_home


class StackError(RuntimeError):
    """The native stack could not do what was asked; the message says what to do."""


@dataclass
class Service:
    name: str
    pid: int
    marker: str                  # a substring of the process's command line
    log: str
    url: str = ""
    extra: dict = field(default_factory=dict)


def run_dir() -> Path:
    path = lab_home() / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir() -> Path:
    path = lab_home() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save(service: Service) -> None:
    """`run/NAME.pid` (the PID, for shell use) and `run/NAME.json` (owner-only: it may hold a token)."""
    path = run_dir() / f"{service.name}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(service), handle)
    (run_dir() / f"{service.name}.pid").write_text(f"{service.pid}\n")


def load(name: str) -> Service | None:
    path = lab_home() / "run" / f"{name}.json"
    try:
        return Service(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def names() -> list[str]:
    """Services with a PID file."""
    return sorted(p.stem for p in (lab_home() / "run").glob("*.json"))


def forget(name: str) -> None:
    for suffix in (".json", ".pid"):
        (lab_home() / "run" / f"{name}{suffix}").unlink(missing_ok=True)


def _ps(*args: str) -> list[str]:
    try:
        done = subprocess.run(["ps", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise StackError("the native stack needs the `ps` command (package procps)") from None
    return done.stdout.splitlines()


def alive(pid: int, marker: str | None = None) -> bool:
    """True while `pid` runs (a zombie does not count) with `marker` in its command line."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)  # our own child that has exited
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    lines = _ps("-o", "stat=", "-o", "args=", "-p", str(pid))
    if not lines or lines[0].lstrip().startswith("Z"):
        return False
    return marker is None or marker in lines[0]


def is_running(service: Service | None) -> bool:
    return service is not None and alive(service.pid, service.marker)


def spawn(name: str, cmd: list[str], marker: str, env: dict[str, str], url: str = "",
          cwd: str | None = None, extra: dict | None = None) -> Service:
    """Start `cmd` in a new session (its own process group), output appended to logs/NAME.log."""
    log_path = logs_dir() / f"{name}.log"
    with open(log_path, "ab") as log:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        log.write(f"=== {stamp} joinlab lab: starting {name}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
    service = Service(name, proc.pid, marker, str(log_path), url, extra or {})
    save(service)
    return service


def _table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) for every process."""
    rows = {}
    for line in _ps("-A", "-o", "pid=", "-o", "ppid=", "-o", "pgid=", "-o", "stat="):
        parts = line.split()
        if len(parts) == 4 and parts[0].isdigit():
            rows[int(parts[0])] = (int(parts[1]), int(parts[2]), parts[3])
    return rows


def tree(pids: list[int]) -> set[int]:
    """`pids`, their process groups and all their descendants, zombies left out."""
    table = _table()
    found = {p for p in pids if p in table}
    found |= {p for p, (_, pgid, _) in table.items() if pgid in found}
    grew = True
    while grew:
        children = {p for p, (ppid, _, _) in table.items() if ppid in found} - found
        found |= children
        grew = bool(children)
    return {p for p in found if not table[p][2].startswith("Z")}


def _living(pids: set[int]) -> set[int]:
    table = _table()
    return {p for p in pids if p in table and not table[p][2].startswith("Z")}


def _signal(pids: set[int], groups: list[int], sig: int) -> None:
    for group in groups:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop(services: list[Service], grace_s: float = 15.0) -> None:
    """SIGTERM every service's process group, SIGKILL whatever of the tree is left after `grace_s`;
    raise if anything survives.

    Descendants in sessions of their own (JupyterLab's kernels) get no SIGTERM from us: their
    parent shuts them down the orderly way, and SIGKILL catches them if it does not."""
    running = [s for s in services if is_running(s)]
    leaders = [s.pid for s in running]
    everything = tree(leaders)
    _signal(set(), leaders, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _living(everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _living(everything)
    if left:
        _signal(left, leaders, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while _living(left) and time.monotonic() < deadline:
            time.sleep(0.1)
    for service in running:
        try:
            os.waitpid(service.pid, os.WNOHANG)  # reap, when we are the parent (tests)
        except ChildProcessError:
            pass
    survivors = _living(everything)
    if survivors:
        raise StackError(f"processes {sorted(survivors)} survived SIGKILL; check them with `ps -p "
                         f"{','.join(map(str, sorted(survivors)))}`")
    for service in services:
        forget(service.name)
