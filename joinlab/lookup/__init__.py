"""The session lookup service of the money-enrichment pattern, and its client.

`client` (lookup_sessions, LookupSettings) is what Spark workers import: standard library only,
so it is imported here at once; the service and its store (Kafka, pyspark's event contracts)
load on first use.
"""
from __future__ import annotations

from joinlab.lookup.client import LookupResult, LookupSettings, health_problem, lookup_sessions

_LAZY = {"LookupService": "joinlab.lookup.service", "ServiceError": "joinlab.lookup.service"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'joinlab.lookup' has no attribute {name!r}")


__all__ = ["LookupResult", "LookupService", "LookupSettings", "ServiceError", "health_problem", "lookup_sessions"]
