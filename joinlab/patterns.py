"""The registry of patterns: one name, the same module name in jobs/, generators/ and references/."""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

PATTERNS = {"tweet-views": "tweet_views", "car-pollution": "car_pollution", "lottery": "lottery",
            "money-enrichment": "money_enrichment"}


def module_name(pattern: str) -> str:
    try:
        return PATTERNS[pattern]
    except KeyError:
        raise SystemExit(f"unknown pattern {pattern!r}; choose one of: {', '.join(PATTERNS)}") from None


def job(pattern: str) -> ModuleType:
    return importlib.import_module(f"jobs.{module_name(pattern)}")


def generator(pattern: str) -> ModuleType:
    return importlib.import_module(f"generators.{module_name(pattern)}")


def reference(pattern: str) -> ModuleType:
    return importlib.import_module(f"references.{module_name(pattern)}")


def alternatives(pattern: str) -> ModuleType:
    """The pattern's comparison of simpler designs (references/<module>_alternatives.py)."""
    try:
        return importlib.import_module(f"references.{module_name(pattern)}_alternatives")
    except ModuleNotFoundError:
        have = [p for p, m in PATTERNS.items() if importlib.util.find_spec(f"references.{m}_alternatives")]
        raise SystemExit(f"{pattern} has no comparison of alternatives; these do: {', '.join(have)}") from None


def all_topics(pattern: str) -> list[str]:
    module = job(pattern)
    return list(module.INPUT_TOPICS) + list(module.OUTPUT_TOPICS)
