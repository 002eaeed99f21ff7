"""The native stack's processes: a PID file per service, liveness, and stopping a whole tree.

Why it is careful: a PID file outlives its process, and PIDs get reused, so a service counts as
alive only while a process with that PID still has the service's marker in its command line.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import psutil

from joinlab.config import lab_home

CONNECT = "spark-connect"  # the lab's Spark Connect server, which joinlab.spark finds by its state file


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


def _folder(name: str) -> Path:
    path = lab_home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def logs_dir() -> Path:
    return _folder("logs")


def save(service: Service) -> None:
    """`run/NAME.pid` (the PID, for shell use) and `run/NAME.json` (owner-only: it may hold a token)."""
    run = _folder("run")
    fd = os.open(run / f"{service.name}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(asdict(service), handle)
    (run / f"{service.name}.pid").write_text(f"{service.pid}\n")


def load(name: str) -> Service | None:
    try:
        return Service(**json.loads((lab_home() / "run" / f"{name}.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def names() -> list[str]:
    """Services with a PID file."""
    return sorted(p.stem for p in (lab_home() / "run").glob("*.json"))


def is_running(service: Service | None) -> bool:
    """True while the service's PID runs (a zombie does not count) with its marker in its command line."""
    try:
        return service is not None and service.marker in " ".join(psutil.Process(service.pid).cmdline())
    except psutil.Error:  # gone, a zombie (no command line), or not ours to read
        return False


def owner(service: Service | None) -> int | None:
    """The uid the service's process runs as, or None when it does not run."""
    try:
        return psutil.Process(service.pid).uids().real if is_running(service) else None
    except psutil.Error:
        return None


def running_connect_server() -> tuple[str, str] | None:
    """(url, token) of the native lab's Connect server while its process runs, else None (never an
    error: a stale state file must not break a session)."""
    server = load(CONNECT)
    return (server.url, server.extra["token"]) if is_running(server) and "token" in server.extra else None


def as_user(user: str):
    """A preexec_fn that makes the child `user` (its group only), for a service run by root."""
    import pwd
    entry = pwd.getpwnam(user)

    def drop() -> None:
        os.setgroups([entry.pw_gid])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    return drop


def spawn(name: str, cmd: list[str], marker: str, env: dict[str, str], url: str = "",
          cwd: str | None = None, extra: dict | None = None, user: str | None = None) -> Service:
    """Start `cmd` in a new session (its own process group), output appended to logs/NAME.log;
    as `user` when given (root starts it)."""
    log_path = logs_dir() / f"{name}.log"
    with open(log_path, "ab") as log:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        log.write(f"=== {stamp} joinlab lab: starting {name}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True, preexec_fn=user and as_user(user))
    service = Service(name, proc.pid, marker, str(log_path), url, extra or {})
    save(service)
    return service


def _table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) for every process but zombies."""
    rows = {}
    for proc in psutil.process_iter(["ppid", "status"]):
        with suppress(OSError):  # gone meanwhile
            if proc.info["status"] != psutil.STATUS_ZOMBIE:
                rows[proc.pid] = (proc.info["ppid"], os.getpgid(proc.pid))
    return rows


def tree(pids: list[int]) -> set[int]:
    """`pids`, their process groups and all their descendants, zombies left out."""
    table = _table()
    found = {p for p in pids if p in table}
    found |= {p for p, (_, group) in table.items() if group in found}
    while children := {p for p, (parent, _) in table.items() if parent in found} - found:
        found |= children
    return found


def resident(pids: set[int]) -> int:
    """The resident set size of `pids` together, in bytes (those that still run)."""
    total = 0
    for pid in pids:
        with suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total


def _wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    """Those of `pids` still alive after up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := pids & _table().keys()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _signal(pids: set[int], groups: list[int], sig: int) -> None:
    for group in groups:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop(services: list[Service], grace_s: float = 15.0) -> None:
    """SIGTERM every service's process group, SIGKILL whatever of the tree is left after `grace_s`;
    raise if anything survives.

    Descendants in sessions of their own (JupyterLab's kernels) get no SIGTERM from us: their
    parent shuts them down the orderly way, and SIGKILL catches them if it does not."""
    running = [s for s in services if is_running(s)]
    leaders = [s.pid for s in running]
    everything = tree(leaders)
    _signal(set(), leaders, signal.SIGTERM)
    left = _wait_gone(everything, grace_s)
    if left:
        _signal(left, leaders, signal.SIGKILL)
        _wait_gone(left, 5.0)
    for service in running:
        with suppress(ChildProcessError):
            os.waitpid(service.pid, os.WNOHANG)  # reap, when we are the parent (tests)
    survivors = sorted(everything & _table().keys())
    if survivors:
        raise StackError(f"processes {survivors} survived SIGKILL; check them with "
                         f"`ps -p {','.join(map(str, survivors))}`")
    for service in services:
        for suffix in (".json", ".pid"):
            (lab_home() / "run" / f"{service.name}{suffix}").unlink(missing_ok=True)
