"""The generator in a background thread, so cells keep running while records arrive."""
from __future__ import annotations

import itertools
import threading

import pandas as pd

from joinlab.generate import Record, Records, send
from joinlab.topics import addressed


class Feed:
    """Sends `records` (named with the pattern's topics; each goes to the participant's:
    joinlab.topics.own) at `rate` records/s in a daemon thread, one second's worth at a time, so
    it can be stopped between chunks; `sent` says how far it got. `records` may be made as they
    are sent (a generator's `stream`): a long feed holds one second's worth, not the whole run."""

    def __init__(self, bootstrap: str, records: list[Record] | Records, rate: float):
        self.bootstrap, self.records, self.rate = bootstrap, records, rate
        self.sent, self.error = 0, None
        self.started_at = pd.Timestamp.now(tz="UTC")  # compare with Kafka timestamps (`timeline(since=...)`)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lab-generator", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        records = iter(self.records)
        try:
            while chunk := list(itertools.islice(records, max(1, int(self.rate)))):
                if self._stop.is_set():
                    return
                send(self.bootstrap, addressed(chunk), rate=self.rate, progress=False)
                self.sent += len(chunk)
        except Exception as exc:  # shown by wait() and repr, never lost
            self.error = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def wait(self, timeout_s: float = 300) -> "Feed":
        self.thread.join(timeout_s)
        if self.thread.is_alive():
            raise TimeoutError(f"the generator is still sending after {timeout_s:.0f}s: {self!r}")
        if self.error:
            raise RuntimeError(f"the generator failed: {self.error!r}") from self.error
        return self

    def stop(self, timeout_s: float = 30) -> None:
        self._stop.set()
        self.thread.join(timeout_s)

    def __repr__(self) -> str:
        state = "failed: " + repr(self.error) if self.error else ("done" if self.done else "sending")
        return f"<Feed {self.sent}/{len(self.records)} records sent at {self.rate:g}/s, {state}>"
