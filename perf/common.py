"""What the Spark studies here share: a fresh embedded broker, the lab's Spark session, a work folder
under LAB_HOME (executors read it too), and a pattern's seeded events on its empty topics."""
from __future__ import annotations

import contextlib
import shutil
import uuid

from perf.bench.batches import fill, log
from joinlab.generate import send

__all__ = ["lab", "log", "send_events"]


@contextlib.contextmanager
def lab(name: str):
    """(spark, bootstrap, work): everything stopped and removed when the block ends."""
    from joinlab.broker import EmbeddedBroker
    from joinlab.config import lab_home
    from joinlab.spark import session, stop
    work = lab_home() / f"perf-{name}-{uuid.uuid4().hex[:8]}"
    log(f"{name}: starting an embedded broker and Spark")
    with EmbeddedBroker() as broker:
        spark = session(f"perf-{name}")
        try:
            yield spark, broker.bootstrap_servers, work
        finally:
            stop(spark)
            shutil.rmtree(work, ignore_errors=True)


def send_events(bootstrap: str, pattern: str, seed: int, tiny: int, steady: int) -> list:
    """`pattern`'s topics with its first `tiny` seeded events on them; the next `steady`, to send later."""
    records = fill(bootstrap, pattern, seed, tiny + steady)
    send(bootstrap, records[:tiny], progress=False)
    return records[tiny:]
