"""The money-enrichment job's lookup path alone: session lookups over HTTP per second.

    .venv/bin/python -m perf.lookup_rate [--events 20000] [--lookups 2000]

Why apart from the job: in a backfill nothing is late, so a job run never calls the service; yet
a live job's late transactions all go this way, and LAB_LOOKUP_TIMEOUT (the deadline of one
micro-batch's lookups) should be sized by this rate. Each session id of seeded money-enrichment
events is looked up once, by the job's own client and settings (concurrency, keep-alive
connections), against the lab's service reading the same broker, both in this process.
No Spark: an embedded broker only.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

from jobs.money_enrichment.job import SESSIONS_TOPIC
from perf.bench.batches import BenchError, Deadline, fill
from joinlab.generate import send
from joinlab.topics import end_offsets, partitions_of, plain_consumer


def _ends(bootstrap: str) -> dict[int, int]:
    consumer = plain_consumer(bootstrap)
    try:
        return {tp.partition: end for tp, end in end_offsets(consumer, partitions_of(consumer, [SESSIONS_TOPIC])).items()}
    finally:
        consumer.close()


def measure(bootstrap: str, seed: int, events: int, lookups: int, timeout_s: float = 120) -> tuple[int, float, int]:
    """Send `events` seeded money-enrichment events to empty topics, then look up at most `lookups`
    of their sessions once each: (lookups, seconds, the client's concurrency)."""
    from joinlab.lookup import LookupService, LookupSettings, lookup_sessions
    send(bootstrap, fill(bootstrap, "money-enrichment", seed, events), progress=False)
    ends = _ends(bootstrap)
    with LookupService(bootstrap, topic=SESSIONS_TOPIC, port=0) as service:
        deadline = Deadline(timeout_s, f"the lookup service loading {SESSIONS_TOPIC}")
        while not service.store.caught_up_to(ends):
            deadline.check()
            time.sleep(0.05)  # polling a condition, under a deadline
        ids = sorted(service.store.ids())[:lookups]
        settings = replace(LookupSettings.from_env({"LAB_LOOKUP_URL": service.url,
                                                    "LAB_LOOKUP_TOKEN": service.token}), timeout_s=timeout_s)
        start = time.monotonic()
        results = lookup_sessions(ids, settings)
        seconds = time.monotonic() - start
    failed = [r for r in results.values() if r.session is None]
    if failed or not ids:
        raise BenchError(f"{len(failed)} of {len(ids)} lookups failed" + (f", e.g. {failed[0].error}" if failed else ""))
    return len(ids), seconds, settings.concurrency


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.lookup_rate", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--events", type=int, default=20000, help="money-enrichment events to generate")
    parser.add_argument("--lookups", type=int, default=2000, help="distinct sessions to look up")
    args = parser.parse_args(argv)
    from joinlab.broker import EmbeddedBroker
    with EmbeddedBroker() as broker:
        n, seconds, concurrency = measure(broker.bootstrap_servers, args.seed, args.events, args.lookups)
    print(f"{n} lookups in {seconds:.2f} s: {n / seconds:,.0f} lookups/s "
          f"(distinct sessions, concurrency {concurrency}, keep-alive, service in-process)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
