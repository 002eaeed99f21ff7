"""The registry of patterns: joinlab never imports a pattern by name, it asks here. pyproject.toml's
`joinlab.patterns` entry point names their table (jobs.PATTERNS); a pattern's generator and batch
reference share its module name in generators/ and references/."""
from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points
from types import ModuleType


# pattern name -> its job module's import path, simplest first
PATTERNS = {name: module for entry in entry_points(group="joinlab.patterns")
            for name, module in entry.load().items()}


def module_name(pattern: str) -> str:
    """The pattern's file name: tweet-views -> tweet_views."""
    if pattern not in PATTERNS:
        raise SystemExit(f"unknown pattern {pattern!r}; choose one of: {', '.join(PATTERNS) or 'none registered'}"
                         + ("" if PATTERNS else " (the lab is not installed: run make install)"))
    return pattern.replace("-", "_")


def job(pattern: str) -> ModuleType:
    module_name(pattern)
    return importlib.import_module(PATTERNS[pattern])


def generator(pattern: str) -> ModuleType:
    return importlib.import_module(f"generators.{module_name(pattern)}")


def reference(pattern: str) -> ModuleType:
    return importlib.import_module(f"references.{module_name(pattern)}")


def alternatives(pattern: str) -> ModuleType:
    """The pattern's comparison of simpler designs (references/<module>_alternatives.py)."""
    try:
        return importlib.import_module(f"references.{module_name(pattern)}_alternatives")
    except ModuleNotFoundError:
        raise SystemExit(f"{pattern} has no comparison of alternatives; these do: "
                         f"{', '.join(with_alternatives())}") from None


def with_alternatives() -> list[str]:
    """The patterns that have a comparison of simpler designs, found without importing it (none
    where the references are not installed: a candidate's workspace)."""
    return [p for p in PATTERNS if _findable(f"references.{module_name(p)}_alternatives")]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there at all
        return False


def all_topics(pattern: str) -> list[str]:
    module = job(pattern)
    return list(module.INPUT_TOPICS) + list(module.OUTPUT_TOPICS)
