"""Where the native stack listens, and what it reads from `.env` (the file the Compose stack uses).

Why one table of ports: when a port is taken `make up` must say which one and which variable moves
it, and the defaults are the ones docker-compose.yml publishes, so the README can say one thing.
"""
from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from joinlab.broker import bindable
from joinlab.stack.procs import StackError

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Port:
    what: str
    env: str
    default: int


PORTS = {
    "broker": Port("Kafka bootstrap (embedded broker)", "LAB_BROKER_PORT", 9092),
    "master": Port("Spark master", "LAB_SPARK_MASTER_PORT", 7077),
    "master-ui": Port("Spark master web UI", "LAB_SPARK_MASTER_UI_PORT", 8080),
    "worker-ui": Port("Spark worker web UI", "LAB_SPARK_WORKER_UI_PORT", 8081),
    "jupyter": Port("JupyterLab", "LAB_JUPYTER_PORT", 8888),
    "lookup": Port("session lookup service", "LAB_LOOKUP_PORT", 8090),
    "connect": Port("Spark Connect server", "LAB_SPARK_CONNECT_PORT", 15002),
    "connect-ui": Port("Spark Connect server's web UI (every job's)", "LAB_SPARK_UI_PORT", 4040),
    # The room's (`make up ROOM=1`): its proxy, the one listener beyond loopback; the hub; the proxy's API.
    "room": Port("the room's JupyterHub (its proxy, over TLS)", "LAB_ROOM_PORT", 8000),
    "room-hub": Port("the room's hub (loopback)", "LAB_ROOM_HUB_PORT", 8001),
    "room-api": Port("the room's proxy API (loopback)", "LAB_ROOM_API_PORT", 8002),
    "room-board": Port("the room's board, the instructor's view (loopback, behind the hub)", "LAB_ROOM_BOARD_PORT", 8003),
}


def project_dir() -> Path:
    """The checkout (the package is installed editable), else the current directory."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").exists() else Path.cwd()


def env_file() -> Path:
    return Path(os.environ.get("LAB_ENV_FILE") or project_dir() / ".env")


def dotenv() -> dict[str, str]:
    """KEY=VALUE lines of `.env` (quotes stripped); {} when there is none."""
    try:
        text = env_file().read_text()
    except OSError:
        return {}
    assignment = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
    matches = (assignment.match(line) for line in text.splitlines())
    return {m.group(1): m.group(2).strip().strip("\"'") for m in matches if m}


def setting(name: str, default: str) -> str:
    return os.environ.get(name) or dotenv().get(name) or default


def port(key: str) -> int:
    spec = PORTS[key]
    text = setting(spec.env, str(spec.default))
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise StackError(f"{spec.env}={text!r} is not a port number (1-65535)")
    return int(text)


def check_free(keys: list[str]) -> None:
    """Fail before starting anything when one of the ports is taken, naming it and its variable."""
    chosen = {key: port(key) for key in keys}
    twice = {n for n in chosen.values() if list(chosen.values()).count(n) > 1}
    if twice:
        raise StackError(f"port {sorted(twice)[0]} is configured for two services; give each its own "
                         f"({', '.join(PORTS[k].env for k in keys)})")
    taken = [key for key, number in chosen.items() if not bindable(number)]
    if taken:
        lines = [f"port {chosen[k]} ({PORTS[k].what}) is taken on {HOST}: set {PORTS[k].env} to a free port "
                 f"(e.g. {PORTS[k].env}={_suggest(chosen[k])}) or stop what listens there "
                 f"(`ss -ltnp 'sport = :{chosen[k]}'` or `lsof -iTCP:{chosen[k]} -sTCP:LISTEN` shows it)"
                 for k in taken]
        raise StackError("\n".join(lines))


def _suggest(number: int) -> int:
    return next((n for n in range(number + 100, min(number + 200, 65535)) if bindable(n)), 0)


def token(name: str, nbytes: int = 16) -> str:
    """$NAME, else .env's NAME; else a new one of `nbytes` random bytes in hex, written to .env
    (created from .env.example, 0600)."""
    if value := setting(name, ""):
        return value
    value = secrets.token_hex(nbytes)
    path = env_file()
    source = path if path.exists() else project_dir() / ".env.example"
    text = source.read_text() if source.exists() else ""
    text, replaced = re.subn(rf"^{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
    if not replaced:
        text += ("" if text.endswith("\n") or not text else "\n") + f"{name}={value}\n"
    path.touch()
    path.chmod(0o600)  # before the token is in it
    path.write_text(text)
    return value


def notebook_dir() -> Path:
    path = Path(os.environ.get("LAB_NOTEBOOK_DIR") or project_dir() / "notebooks").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path
