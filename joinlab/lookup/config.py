"""Where the lookup service listens and where its token lives: one answer for service and client.

Why no joinlab.config.lab_home() here: it creates the directory, and the client runs inside
Spark Python workers, where reading a setting must not write anything.
"""
from __future__ import annotations

import os
from pathlib import Path

DEFAULT_PORT = 8090
PORT_ENV, TOKEN_ENV = "LAB_LOOKUP_PORT", "LAB_LOOKUP_TOKEN"


def default_port(environ=os.environ) -> int:
    """$LAB_LOOKUP_PORT, else 8090; a bad value raises ValueError naming the variable."""
    text = environ.get(PORT_ENV) or str(DEFAULT_PORT)
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise ValueError(f"{PORT_ENV}={text!r} is not a port number (1-65535; 0 picks a free one)")
    return int(text)


def token_file(environ=os.environ) -> Path:
    """$LAB_HOME/run/lookup.token (LAB_HOME defaults to ./.lab, as joinlab.config.lab_home)."""
    return Path(environ.get("LAB_HOME", ".lab")).resolve() / "run" / "lookup.token"


def configured_token(environ=os.environ) -> str:
    """$LAB_LOOKUP_TOKEN, else the token file's content, else '' (an empty variable counts as unset,
    so Compose can pass `${LAB_LOOKUP_TOKEN:-}` and fall back to the file on the shared volume)."""
    token = (environ.get(TOKEN_ENV) or "").strip()
    if token:
        return token
    try:
        return token_file(environ).read_text().strip()
    except OSError:
        return ""
