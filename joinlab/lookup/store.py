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

from joinlab.kit.events import validate
from joinlab.topics import plain_consumer

REDISCOVER_S = 2.0  # how often to look for the topic (or new partitions) again


class SessionStore:
    """session_id -> the first valid session event, filled by a background consumer, of `topic`: the
    one a registered pattern's LOOKUP (joinlab.patterns.Lookup) names; None: the first of them."""

    def __init__(self, bootstrap: str, topic: str | None = None):
        from joinlab import patterns  # deferred: the registry imports the jobs, and with them Spark
        lookups = [lookup for lookup in patterns.lookups().values() if topic in (None, lookup.schema.topic)]
        if not lookups:
            raise ValueError(f"no pattern's job asks the lookup service about {topic or 'any topic'}; those asked: "
                             f"{', '.join(lk.schema.topic for lk in patterns.lookups().values()) or 'none'}")
        self.lookup = lookups[0]  # the service and the job judge a record alike: by the job's schema
        self.schema, self.bootstrap, self.topic = self.lookup.schema, bootstrap, self.lookup.schema.topic
        self._sessions: dict[str, dict] = {}
        self._positions: dict[int, int] = {}  # partition -> the next offset to consume
        self.invalid = 0  # records skipped as invalid
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self, session_id: str) -> dict | None:
        with self._lock:
            session = self._sessions.get(session_id)
            return dict(session) if session else None

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    def caught_up_to(self, ends: dict[int, int]) -> bool:
        """Whether every partition in `ends` (partition -> end offset) has been consumed to its end."""
        with self._lock:
            return all(self._positions.get(p, -1) >= end for p, end in ends.items())

    def start(self) -> "SessionStore":
        """Connect (raises kafka.errors.NoBrokersAvailable when nothing answers) and start reading."""
        self._thread = threading.Thread(target=self._run, args=(plain_consumer(self.bootstrap),),
                                        name=f"session-store-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout_s)

    # --- the consumer thread ----------------------------------------------------------------

    def _run(self, consumer) -> None:
        last_error = None
        try:
            while not self._stop.is_set():
                try:
                    self._assign_new_partitions(consumer)
                    self._consume(consumer, until=REDISCOVER_S)
                    last_error = None
                except Exception as exc:  # keep serving what is loaded; retry
                    if str(exc) != last_error:  # once, not every second while it lasts
                        print(f"lookup: reading {self.topic} failed, retrying: {exc}", file=sys.stderr, flush=True)
                    last_error = str(exc)
                    self._stop.wait(1.0)
        finally:
            consumer.close()

    def _assign_new_partitions(self, consumer) -> None:
        consumer.topics()  # refresh metadata: the topic, or partitions of it, may have been created since
        found = consumer.partitions_for_topic(self.topic)
        if new := [TopicPartition(self.topic, p) for p in sorted(found - set(self._positions))]:
            beginnings = consumer.beginning_offsets(new)
            tps = [TopicPartition(self.topic, p) for p in sorted(found)]
            consumer.assign(tps)
            with self._lock:
                self._positions.update({tp.partition: offset for tp, offset in beginnings.items()})
            for tp in tps:  # every position given: a partition the consumer has no position for starts at its end
                consumer.seek(tp, self._positions[tp.partition])

    def _consume(self, consumer, until: float) -> None:
        if not self._positions:
            self._stop.wait(until)
            return
        end = time.monotonic() + until
        while time.monotonic() < end and not self._stop.is_set():
            for tp, records in consumer.poll(timeout_ms=200).items():
                position = consumer.position(tp)
                with self._lock:
                    for record in records:
                        event, _ = validate(self.schema, record.value, record.timestamp)
                        if event is None:
                            self.invalid += 1
                        else:
                            self._sessions.setdefault(event[self.lookup.key],
                                                      {name: event.get(name) for name in self.schema.fields})
                    self._positions[tp.partition] = position
