"""Exercise 4 (the hard one, 90 min): money enrichment. Read money_enrichment.md
first (in the lab: jobs/money_enrichment/README.md, the part above its solution marker).

Write SessionJoin, the first of the two stages the job chains: dedup, waiting, expiry. Everything
else is given: jobs/money_enrichment/job.py parses the three topics, dead-letters malformed records,
keys and wires the stages and writes the output; stage 2 (UserEnrich in jobs/money_enrichment/given.py)
adds the user as of the transaction's time and flags the first transaction of each type; the last
step asks the session lookup service for the session of every transaction you send it.

SessionJoin(config) runs in event-time mode, grouped by (entity, entity_id): ("session",
session_id) for transactions and SessionStarted, ("user", str(user_id)) for UserUpdated. `config`
is a Settings (jobs/money_enrichment/rules.py): watermark_delay_ms, session_duration_ms (2 min),
wait_limit_ms (30 s), dedup_horizon_ms (10 min). Input rows have the columns
EVENT_COLUMNS (given.py):

    entity, entity_id, kind (TX, SESSION_START or USER_UPDATE), tx_id, user_id, session_id,
    amount, currency, type, t_us (event time, microseconds), src_partition, src_offset,
    country, device (a session's), name, segment, version (a user's)

Yield rows of one shape (FLOW in given.py), made with the given helpers:

    flow(TX, USER, str(user_id), watermark_ms, **tx, session_country=.., session_device=..,
         session_start_us=.., enriched_by=BY_STREAM)        a transaction joined to its session
    flow(TX, USER, str(user_id), watermark_ms, **tx, enriched_by=BY_LOOKUP)
                                                         a transaction for the lookup service
    dead(fields, TX or SESSION_START, reason, watermark_ms)   a dead letter with its reason

where `tx` is a dict of the transaction's fields (TX_FIELDS: tx_id, user_id, session_id, amount,
currency, type, t_us, src_partition, src_offset). User updates go on to stage 2 (given below).

Time: timerValues.getCurrentWatermarkInMs() is the watermark; handle.registerTimer(ms) asks for
handleExpiredTimer(key, timerValues, expiredTimerInfo) once the watermark reaches ms (a timer
must lie ahead of the watermark); joinlab.kit.events.timer_ms(t_us) is the first watermark (ms) at or
past an event time. State lives in `handle`: getValueState(name, "field type, ..."),
getMapState(name, "key type", "field type, ..."); ValueState exists(), get(), update(tuple),
clear(); MapState containsKey((k,)), getValue((k,)), updateValue((k,), tuple), removeKey((k,)),
iterator().

Grade it: `make check-fast`, then `make check` (in a workspace), or in the lab
`joinlab interview check money-enrichment --solution THIS_FILE`.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.money_enrichment.rules import BY_LOOKUP, BY_STREAM, Settings  # noqa: F401
from jobs.money_enrichment.given import (SESSION_START, TX, TX_FIELDS, USER, USER_UPDATE, dead,  # noqa: F401
                                          flow, pick)
from joinlab.kit.events import timer_ms  # noqa: F401


class SessionJoin(StatefulProcessor):
    """Per session: its transactions joined to it, each transaction once."""

    def __init__(self, config: Settings):
        self.config = config

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: the state a session needs.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        for row in rows:
            if row.kind == USER_UPDATE:  # given: user updates go on to stage 2, keyed by user
                yield flow(USER_UPDATE, USER, str(row.user_id), watermark, user_id=row.user_id, t_us=row.t_us,
                           name=row.name, country=row.country, segment=row.segment, version=row.version)
            # TODO: SESSION_START and TX rows.

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        return iter(())

    def close(self) -> None:
        pass
