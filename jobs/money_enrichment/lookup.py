"""The lookup step of money enrichment: late transactions get their session from the lab's
session service (joinlab/lookup), after the stateful stages and before the sink.

Why a stateless step at the end, over whole Arrow batches: a transformWithState handler sees
one key at a time, so calls made there would run one by one. Here every late transaction of a
task's micro-batch is looked up at once (distinct session ids, bounded concurrency, retries),
and the step returns within the lookup timeout whatever the service does. Rows keep their
order, so a re-emitted correction still follows the record it corrects. A failed lookup turns
the transaction into a dead letter with the reason; nothing is dropped.
"""
from __future__ import annotations

from typing import Callable, Iterator

from jobs.money_enrichment.given import DEAD, ENRICHED, PASS, TX
from jobs.money_enrichment.rules import BY_LOOKUP
from joinlab.kit.events import micros
from joinlab.lookup.client import lookup_sessions


def needs_lookup(row: dict) -> bool:
    return row["kind"] == ENRICHED and row["enriched_by"] == BY_LOOKUP and row["session_start_us"] is None


def fill(row: dict, result) -> dict:
    """The row with its session's fields, or a dead letter saying why there are none."""
    session = result.session
    if session is None:
        return dict(row, kind=DEAD, entity=PASS, entity_id=row["tx_id"], reason=result.error or "lookup failed",
                    source_kind=TX)
    return dict(row, session_country=session["country"], session_device=session["device"],
                session_start_us=micros(session["event_time"]))


def enrich_rows(rows: list[dict], lookup: Callable[[list[str]], dict]) -> list[dict]:
    """Every row that needs a session gets one from `lookup(session_ids) -> {id: result}`."""
    ids = sorted({row["session_id"] for row in rows if needs_lookup(row)})
    if not ids:
        return rows
    results = lookup(ids)
    return [fill(row, results[row["session_id"]]) if needs_lookup(row) else row for row in rows]


def lookup_step(settings) -> Callable:
    """The mapInArrow function for `settings` (joinlab.lookup.LookupSettings, read on the driver)."""
    def run(batches: Iterator) -> Iterator:  # runs on Spark's Python workers
        import pyarrow as pa
        for batch in batches:
            rows = enrich_rows(batch.to_pylist(), lambda ids: lookup_sessions(ids, settings))
            yield pa.RecordBatch.from_pylist(rows, schema=batch.schema)
    return run
