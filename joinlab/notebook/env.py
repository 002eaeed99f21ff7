"""Where a notebook's lab lives and how big it runs: LAB_HOME, the broker, sizes from the environment.

Why here: Jupyter starts a kernel in the notebook's folder and `make test` runs the same notebooks
small, so both must be settled before the first cell needs a path or a size.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from joinlab import broker


def default_lab_home() -> None:
    """Point LAB_HOME at the project's .lab/ unless it is set: lab state (broker.json,
    checkpoints) lives in the project, not in the folder the kernel started in."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").exists() and "LAB_HOME" not in os.environ:
        os.environ["LAB_HOME"] = str(root / ".lab")


def setting(name: str, default: float) -> Any:
    """$LAB_NOTEBOOK_<NAME> if set (e.g. LAB_NOTEBOOK_EVENTS=400 in tests), else `default`."""
    raw = os.environ.get(f"LAB_NOTEBOOK_{name.upper()}")
    if raw is None:
        return default
    return type(default)(float(raw)) if isinstance(default, int) else float(raw)


def connect() -> str:
    """The broker's bootstrap servers: $KAFKA_BOOTSTRAP_SERVERS, else the background embedded
    broker (`make up` / `joinlab broker start`), which is started here if none runs."""
    try:
        return broker.bootstrap_servers()
    except broker.BrokerError:
        info = broker.start_background()
        print(f"started the embedded broker at {info.bootstrap_servers} (stop it: `joinlab broker stop`)")
        return info.bootstrap_servers
