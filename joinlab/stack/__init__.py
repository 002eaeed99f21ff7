"""The lab without Docker: the same services as docker-compose.yml, as local processes on 127.0.0.1.

`joinlab lab up|down|ps|logs|generate` (and `make up-native`, `make down`, ...) drive `lab`;
`procs` owns PID files and stopping process trees, `settings` ports and `.env`, `services` how
each service starts and when it is healthy. Everything lives under $LAB_HOME (default .lab/).
"""
from __future__ import annotations

from joinlab.stack.procs import StackError


def running_master_url() -> str | None:
    """spark://... of the native stack's master while its process runs, else None."""
    from joinlab.stack import procs
    from joinlab.stack.services import MASTER
    try:
        master = procs.load(MASTER)
        return master.url if procs.is_running(master) else None
    except (StackError, OSError):  # never let a stale state file break a session
        return None


__all__ = ["StackError", "running_master_url"]
