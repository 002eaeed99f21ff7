"""Row 3e: the money-enrichment job's lookup path alone - session lookups over HTTP per second.

Why apart from the job row: in a backfill nothing is late, so the job row never calls the
service; yet a live job's late transactions all go this way, and MONEY_LOOKUP_TIMEOUT (the
deadline of one micro-batch's lookups) should be sized by this rate. The ids are the sessions
the money job row produced, looked up once each, by the job's own client and settings
(concurrency, keep-alive connections), against the lab's service reading the same broker."""
from __future__ import annotations

import time
from dataclasses import replace

from joinlab.bench.offsets import read_ranges
from joinlab.bench.step import BenchError
from joinlab.bench.table import Measurement


def lookup_path(bootstrap: str, lookups: int, timeout_s: float) -> Measurement:
    from jobs.money_enrichment.job import SESSIONS_TOPIC
    from joinlab.lookup import LookupService, LookupSettings, lookup_sessions
    ends = {partition: end for (topic, partition), (_, end) in read_ranges(bootstrap, [SESSIONS_TOPIC]).items()}
    with LookupService(bootstrap, topic=SESSIONS_TOPIC, port=0) as service:
        deadline = time.monotonic() + timeout_s
        while not service.store.caught_up_to(ends):
            if time.monotonic() > deadline:
                raise BenchError(f"row 3e: the lookup service did not load {SESSIONS_TOPIC} within {timeout_s:.0f} s")
            time.sleep(0.05)
        ids = sorted(service.store.ids())[:lookups]
        settings = replace(LookupSettings.from_env({"MONEY_LOOKUP_URL": service.url,
                                                    "LAB_LOOKUP_TOKEN": service.token}), timeout_s=timeout_s)
        start = time.monotonic()
        results = lookup_sessions(ids, settings)
        seconds = time.monotonic() - start
    failed = sum(result.session is None for result in results.values())
    if failed:
        raise BenchError(f"row 3e: {failed} of {len(ids)} lookups failed, e.g. "
                         f"{next(r.error for r in results.values() if r.session is None)}")
    return Measurement("3e money-enrichment lookup path (HTTP)", len(ids), seconds,
                       f"distinct sessions, concurrency {settings.concurrency}, keep-alive, service in-process")
