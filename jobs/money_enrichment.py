"""Money enrichment: transactions joined to their session and to their user as of the
transaction's time, deduplicated, first-of-type flagged; late ones enriched by a lookup service.

(build: below; stages: jobs/money_enrichment_stages.py; rules: money_enrichment_rules.py)
"""
from __future__ import annotations

from jobs.money_enrichment_rules import TYPES
from joinlab.events import Check, EventSchema

TRANSACTIONS_TOPIC, SESSIONS_TOPIC, USERS_TOPIC = "money-transactions", "money-sessions", "money-users"
ENRICHED_TOPIC, DEAD_LETTERS_TOPIC = "money-enriched", "money-dlq"
INPUT_TOPICS = [TRANSACTIONS_TOPIC, SESSIONS_TOPIC, USERS_TOPIC]
OUTPUT_TOPICS = [ENRICHED_TOPIC, DEAD_LETTERS_TOPIC]


def _not_empty(name: str) -> Check:
    return Check(f"length({name}) > 0", lambda e: len(e[name]) > 0, f"invalid field: {name} (must not be empty)")


TRANSACTIONS = EventSchema(
    TRANSACTIONS_TOPIC, {"tx_id": "string", "user_id": "bigint", "session_id": "string", "amount": "double",
                         "currency": "string", "type": "string", "event_time": "timestamp"},
    checks=(_not_empty("tx_id"), _not_empty("session_id"),
            Check("amount > 0", lambda e: e["amount"] > 0, "invalid field: amount (must be > 0)"),
            Check(f"`type` IN ({', '.join(repr(t) for t in TYPES)})", lambda e: e["type"] in TYPES,
                  f"invalid field: type (must be one of {', '.join(TYPES)})")))
SESSIONS = EventSchema(
    SESSIONS_TOPIC, {"session_id": "string", "user_id": "bigint", "country": "string", "device": "string",
                     "event_time": "timestamp"},
    checks=(_not_empty("session_id"),))
USERS = EventSchema(
    USERS_TOPIC, {"user_id": "bigint", "name": "string", "country": "string", "segment": "string",
                  "version": "bigint", "event_time": "timestamp"})
SCHEMAS = [TRANSACTIONS, SESSIONS, USERS]
