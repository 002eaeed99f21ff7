"""The lookup service's data: every session of the sessions topic, read from the beginning.

Why a thread and manual assignment: the service must answer while it reads, and it needs every
session, not a share of them, so there is no consumer group (and no group join to wait for).
Why the first valid record wins: a session starts once; a duplicate or a replay must not change
what the job is told. Invalid records are counted and skipped: the job dead-letters them.
"""
from __future__ import annotations

import sys
import threading
import time

from kafka import TopicPartition

from joinlab.events import EventSchema, validate
from joinlab.topics import plain_consumer

REDISCOVER_S = 2.0  # how often to look for the topic (or new partitions) again


class SessionStore:
    """session_id -> the first valid session event, filled by a background consumer."""

    def __init__(self, bootstrap: str, topic: str | None = None, schema: EventSchema | None = None):
        if schema is None:  # the job's own contract: the service and the job judge a session alike
            from joinlab import patterns  # deferred: the registry imports the job, and with it Spark
            schema = patterns.job("money-enrichment").SESSIONS
        self.bootstrap, self.schema = bootstrap, schema
        self.topic = topic or schema.topic
        self._sessions: dict[str, dict] = {}
        self._positions: dict[int, int] = {}
        self._invalid = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer = None
        self.error: str | None = None  # the last consumer error, while it lasts

    # --- reading ----------------------------------------------------------------------------

    def get(self, session_id: str) -> dict | None:
        with self._lock:
            session = self._sessions.get(session_id)
            return dict(session) if session else None

    def ids(self) -> list[str]:
        """The session ids loaded so far."""
        with self._lock:
            return list(self._sessions)

    @property
    def sessions(self) -> int:
        """How many sessions are loaded."""
        with self._lock:
            return len(self._sessions)

    @property
    def invalid(self) -> int:
        """How many records were skipped as invalid."""
        with self._lock:
            return self._invalid

    def positions(self) -> dict[int, int]:
        """partition -> the next offset to consume (consumed everything below it)."""
        with self._lock:
            return dict(self._positions)

    def caught_up_to(self, ends: dict[int, int]) -> bool:
        """Whether every partition in `ends` (partition -> end offset) has been consumed to its end."""
        positions = self.positions()
        return all(p in positions and positions[p] >= end for p, end in ends.items())

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> "SessionStore":
        """Connect (raises kafka.errors.NoBrokersAvailable when nothing answers) and start reading."""
        self._consumer = plain_consumer(self.bootstrap)
        self._thread = threading.Thread(target=self._run, name=f"session-store-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout_s)

    def __enter__(self) -> "SessionStore":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the consumer thread ----------------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        try:
            while not self._stop.is_set():
                try:
                    self._assign_new_partitions(consumer)
                    self._consume(consumer, until=REDISCOVER_S)
                    self.error = None
                except Exception as exc:  # keep serving what is loaded; retry
                    if str(exc) != self.error:
                        print(f"lookup: reading {self.topic} failed, retrying: {exc}", file=sys.stderr, flush=True)
                    self.error = str(exc)
                    self._stop.wait(1.0)
        finally:
            consumer.close()

    def _assign_new_partitions(self, consumer) -> None:
        consumer.topics()  # refresh metadata: the topic may have been created since
        found = consumer.partitions_for_topic(self.topic) or set()
        new = sorted(found - set(self._positions))
        if not new:
            return
        tps = [TopicPartition(self.topic, p) for p in sorted(found)]
        beginnings = consumer.beginning_offsets([TopicPartition(self.topic, p) for p in new])
        consumer.assign(tps)
        with self._lock:
            for tp, offset in beginnings.items():
                self._positions[tp.partition] = offset
            positions = dict(self._positions)
        for tp in tps:  # explicit offsets always (see the README on the embedded broker)
            consumer.seek(tp, positions[tp.partition])

    def _consume(self, consumer, until: float) -> None:
        if not self._positions:
            self._stop.wait(until)
            return
        end = time.monotonic() + until
        while time.monotonic() < end and not self._stop.is_set():
            for tp, records in consumer.poll(timeout_ms=200).items():
                self._apply(tp, records, consumer.position(tp))

    def _apply(self, tp: TopicPartition, records, position: int) -> None:
        fields = self.schema.fields
        with self._lock:
            for record in records:
                event, _ = validate(self.schema, record.value, record.timestamp)
                if event is None:
                    self._invalid += 1
                    continue
                self._sessions.setdefault(event["session_id"], {name: event.get(name) for name in fields})
            self._positions[tp.partition] = max(position, records[-1].offset + 1 if records else 0)
