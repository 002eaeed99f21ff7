"""The session lookup service a pattern's job asks (its LOOKUP, joinlab.patterns), and its client. The client is what
Spark workers import, standard library only, so it is imported here at once; the service and its
store (Kafka, pyspark's event contracts) load on first use.
"""
from __future__ import annotations

from joinlab.lookup.client import LookupResult, LookupSettings, health_problem, lookup_sessions


def __getattr__(name: str):
    if name in ("LookupService", "ServiceError"):
        from joinlab.lookup import service
        return getattr(service, name)
    raise AttributeError(f"module 'joinlab.lookup' has no attribute {name!r}")


__all__ = ["LookupResult", "LookupService", "LookupSettings", "ServiceError", "health_problem", "lookup_sessions"]
