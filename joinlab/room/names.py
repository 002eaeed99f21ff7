"""A participant's name at the room's door, and the Unix user it becomes (`lab-NAME`).

The rule is the lab's own (joinlab.config.PARTICIPANT_NAME: what a topic prefix and a Unix user
name can both hold); JupyterHub lower-cases what people type. A name outside it is refused at the
login with the rule in the message, never mapped to another name that could be someone else's.
"""
from __future__ import annotations

from joinlab.config import PARTICIPANT_NAME, PARTICIPANT_RULE

UNIX_PREFIX = "lab-"  # never a system account's name (root, daemon, ...), whatever a participant picks


def problem(name: str) -> str | None:
    """Why `name` cannot be a participant's name, or None."""
    return None if PARTICIPANT_NAME.fullmatch(name) else f"{name!r} cannot be your name here: use {PARTICIPANT_RULE}"


def unix_user(name: str) -> str:
    return UNIX_PREFIX + name
