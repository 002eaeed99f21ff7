"""Kafka clients kept per Python worker process and reused by its next tasks.

Why: a new idempotent producer costs ~500 ms before its first acknowledgement on the lab's broker
(a reused one: under 1 ms), and a micro-batch runs about ten sink tasks; Python workers are reused
across tasks (spark.python.worker.reuse, the default), so one client per worker and configuration
pays that once. Spark's own connector does the same (InternalKafkaProducerPool: one producer per
configuration, closed after an idle timeout; KafkaDataConsumer: a consumer that failed is
invalidated, never handed out again). The rules here are the same:

- the key is the whole client configuration (sorted): a changed bootstrap address gets a new client;
- a client is borrowed by one task at a time (a Python worker runs one task at a time; the lock
  only guards the dictionary);
- a task that fails discards its client instead of returning it (a producer in an error state,
  or with records of the failed task still queued, is never reused);
- clients idle for longer than IDLE_S, and the least recently used beyond MAX_CLIENTS, are closed,
  and so is an idle client once it reports every broker down (WATCH_S: such a client reconnects
  to the address of a broker that is gone many times a second, and tests start a broker per test).

Every client made here (pooled or not) also gets QUIET, so a broker that goes away (the end of a
bench, a restarted lab broker) is reported once, not in a flood of librdkafka `%3|...|FAIL|` lines:

- metadata.recovery.strategy none: with librdkafka's default (rebootstrap) a client that has lost
  every broker starts a fresh bootstrap connection every ~50 ms (a fresh connection has no reconnect
  backoff) and logs each failure: about 20 lines a second per idle pooled consumer (its consumer
  group handle keeps looking for a coordinator), measured. With none it keeps the broker it knows
  and backs off (RECONNECT); a broker listening at that address again is found.
- log.connection.close false: no line when a broker closes an idle connection (it is reopened).
- logger: librdkafka's lines go through Python logging instead of straight to stderr. They are
  handed over when the client is used (poll, consume, flush), so a client idle in the pool prints
  nothing; BrokerLoss lets one connection failure per broker through per REPORT_EVERY_S. A read or
  a write that cannot complete still fails its task with its own error.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

IDLE_S = float(os.environ.get("LAB_KAFKA_CLIENT_IDLE_S", "300"))
# A pooled client drops its broker connections after this long without traffic: an idle worker
# holds no sockets, so a broker can stop at once (the lab's broker waits for open connections).
CONNECTION_IDLE_MS = 1000
# librdkafka counts that idle close as a failed connection and delays the next one, doubling the
# delay each time up to reconnect.backoff.max.ms (10 s by default): a consumer idle for a second
# between two micro-batches then waited up to 10 s before its next fetch (measured: reads of a few
# hundred records took 8-9 s, batches a second apart). With these the delay starts again at 10 ms
# after every idle close (it resets once the last attempt is older than the maximum), and a broker
# that is gone is tried at most every ~100 ms.
RECONNECT = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100}
MAX_CLIENTS = 4  # per kind (producer, consumer) and process
# An idle client whose brokers are all gone keeps reconnecting to their address, 10-20 times a
# second (measured; RECONNECT), until it is closed. The port of a stopped broker is soon handed to
# another listener on this machine, and a Spark transformWithState task's state server accepts
# exactly one connection: a stray Kafka request that takes it kills the server on its first bytes
# (`assertion failed` in serveRequests) and the task waits forever. So idle clients are polled
# every WATCH_S, and one that reports every broker down is closed at once.
WATCH_S = 0.25

REPORT_EVERY_S = 60.0  # one line per lost broker and process in this time


class BrokerLoss(logging.Filter):
    """librdkafka's connection failures (facilities FAIL and ERROR), one per broker address per
    REPORT_EVERY_S, rewritten as one line that says what it means; other lines pass unchanged."""

    ADDRESS = re.compile(r"(\[[0-9a-fA-F:]+\]|[\w.-]+):(\d+)")

    def __init__(self):
        super().__init__()
        self.reported: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.split(" ", 1)[0] not in ("FAIL", "ERROR"):
            return True
        if getattr(_closing, "now", False):  # a client being closed needs no broker any more
            return False
        found = self.ADDRESS.search(text.split("]: ", 1)[-1])
        broker = found.group(0) if found else "(all brokers)"
        now = time.monotonic()
        if now - self.reported.get(broker, -REPORT_EVERY_S) < REPORT_EVERY_S:
            return False
        self.reported[broker] = now
        record.msg, record.args = (f"Kafka broker {broker} unreachable: {text.split(']: ', 1)[-1]} "
                                   f"(the client retries; repeats are not shown for {REPORT_EVERY_S:.0f} s)"), ()
        return True


def _client_log() -> logging.Logger:
    log = logging.getLogger("joinlab.kafka.client")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: %(message)s"))
        log.addHandler(handler)
        log.addFilter(BrokerLoss())
        log.setLevel(logging.WARNING)  # librdkafka's notices and debug lines stay out
        log.propagate = False  # once, whatever the host application's logging does
    return log


QUIET = {"metadata.recovery.strategy": "none", "log.connection.close": False}
_unknown: set[str] = set()  # QUIET properties this librdkafka does not know (an older release)


_down: dict[int, threading.Event] = {}  # id(client) -> set once it reported every broker down


def _new(create: Callable[[dict], object], config: dict) -> object:
    """`create` with QUIET, the client logger and a watch for "all brokers down" (not part of the
    pool's key)."""
    down = threading.Event()

    def on_error(error) -> None:
        from confluent_kafka import KafkaError
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            down.set()

    while True:
        quiet = {k: v for k, v in QUIET.items() if k not in _unknown}
        try:
            client = create({**config, **quiet, "logger": _client_log(), "error_cb": on_error})
            _down[id(client)] = down
            return client
        except Exception as exc:
            missing = [k for k in quiet if k in str(exc)]
            if not missing:
                raise
            _unknown.update(missing)


_lock = threading.Lock()
_idle: dict[tuple, tuple[object, float]] = {}  # (kind, config) -> (client, returned at)


def _key(kind: str, config: dict) -> tuple:
    return (kind, tuple(sorted((k, str(v)) for k, v in config.items())))


_closing = threading.local()  # set while this thread closes a client (its last lines are handed over then)


def _close(client) -> None:
    closing, _closing.now = getattr(_closing, "now", False), True
    try:
        client.close()
    except Exception:  # closing a client of a broker that is gone must not fail the task
        pass
    finally:
        _closing.now = closing
        _down.pop(id(client), None)


def _gone(client) -> bool:
    down = _down.get(id(client))
    return down is not None and down.is_set()


def _watch() -> None:
    """Poll the idle clients (that hands their errors over) and close those whose brokers are all
    down. Their lines are not shown: an idle client needs no broker, and a task that needs one
    reports the failure itself."""
    global watch_rounds
    _closing.now = True  # this thread only: BrokerLoss drops the lines of clients it polls
    while True:
        time.sleep(WATCH_S)
        with _lock:  # a client in _idle is borrowed by nobody while the lock is held
            for client, _ in _idle.values():
                poll = getattr(client, "poll", None)  # None: not a Kafka client (the pool's own tests)
                try:
                    if poll is not None:
                        poll(0)
                except Exception:  # the watch outlives one client's failure; a task using it reports it
                    pass
            gone = [k for k, (client, _) in _idle.items() if _gone(client)]
            stale = [_idle.pop(k)[0] for k in gone]
            watch_rounds += 1
        for client in stale:
            _close(client)


_watcher: list[threading.Thread] = []
watch_rounds = 0  # rounds of _watch so far (tests wait for some)


def _start_watching() -> None:
    """Once per process, at the first client pooled (never at import: Spark's daemon forks workers)."""
    if not _watcher or not _watcher[0].is_alive():
        _watcher[:] = [threading.Thread(target=_watch, name="kafka-pool-watch", daemon=True)]
        _watcher[0].start()


def _evict(now: float) -> list:
    """Entries to close (caller closes them outside the lock): idle too long, or too many."""
    gone = [k for k, (client, at) in _idle.items() if now - at > IDLE_S or _gone(client)]
    by_age = sorted((at, k) for k, (_, at) in _idle.items() if k not in gone)
    for kind in {k[0] for k in _idle}:
        same = [k for _, k in by_age if k[0] == kind]
        gone += same[:max(0, len(same) - MAX_CLIENTS)]
    return [_idle.pop(k)[0] for k in gone]


@contextmanager
def borrowed(kind: str, config: dict, create: Callable[[dict], object],
             reusable: Callable[[object], bool] = lambda c: True, enabled: bool = True) -> Iterator[object]:
    """A client for `config`: an idle one of this process, or a new one. It goes back to the pool
    only if the block ends without an exception and `reusable(client)` holds; else it is closed.
    With `enabled` false (option joinlab.pooling=false: the bench's ablation), one client per task."""
    if not enabled:
        client = _new(create, config)
        try:
            yield client
        finally:
            _close(client)
        return
    config = {**config, "connections.max.idle.ms": CONNECTION_IDLE_MS, **RECONNECT}
    key = _key(kind, config)
    with _lock:
        entry = _idle.pop(key, None)
        stale = _evict(time.monotonic())
    for old in stale:
        _close(old)
    client = entry[0] if entry else _new(create, config)
    try:
        yield client
    except BaseException:
        _close(client)
        raise
    if not reusable(client):
        _close(client)
        return
    with _lock:
        previous = _idle.pop(key, None)
        _idle[key] = (client, time.monotonic())
        _start_watching()
    if previous is not None:
        _close(previous)


def close_all() -> None:
    with _lock:
        clients = [c for c, _ in _idle.values()]
        _idle.clear()
    for client in clients:
        _close(client)


atexit.register(close_all)
