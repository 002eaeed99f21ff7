"""The lookup client a job with a LOOKUP calls from Spark Python workers (mapInArrow); what a
call does, and why a late transaction never holds the stream up past the timeout: docs/lookup.md.
The WHOLE call shares one deadline: each attempt's socket timeout is the time left, and whatever
is not answered by then gets the timeout reason. Importing it starts nothing; its threads (one
keep-alive connection each) end before it returns. Standard library only.
"""
from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from joinlab.config import duration_ms
from joinlab.lookup.config import TOKEN_ENV, configured_token, default_port, token_file

BACKOFF_S = (0.05, 0.1, 0.2, 0.4)  # then 0.4 s per further retry
JOIN_GRACE_S = 0.25                 # how long past the deadline we wait for a worker thread
START_HINT = "is it running? (`make up` or `python -m joinlab.lookup`)"


@dataclass(frozen=True)
class LookupSettings:
    url: str
    token: str = field(repr=False)  # never printed: Spark logs the reprs of closures' values
    timeout_s: float = 2.0
    retries: int = 2
    concurrency: int = 8

    def __post_init__(self):
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:  # the service serves plain HTTP only
            raise ValueError(f"lookup URL {self.url!r} ($LAB_LOOKUP_URL): give http://host:port, "
                             "e.g. http://127.0.0.1:8090")
        if not self.timeout_s > 0 or self.retries < 0 or self.concurrency < 1:
            raise ValueError(f"lookup settings: timeout ($LAB_LOOKUP_TIMEOUT) must be > 0, retries >= 0, "
                             f"concurrency >= 1 (got {self})")

    @classmethod
    def from_env(cls, env=os.environ) -> "LookupSettings":
        """LAB_LOOKUP_URL, LAB_LOOKUP_TOKEN (else the token file), LAB_LOOKUP_TIMEOUT,
        LAB_LOOKUP_RETRIES, LAB_LOOKUP_CONCURRENCY; a bad value raises ValueError naming it."""
        url = env.get("LAB_LOOKUP_URL") or f"http://127.0.0.1:{default_port(env) or 8090}"
        timeout_ms = duration_ms(env.get("LAB_LOOKUP_TIMEOUT") or "2 seconds", "LAB_LOOKUP_TIMEOUT")
        return cls(url, configured_token(env), timeout_ms / 1000, _int(env, "LAB_LOOKUP_RETRIES", 2, 0),
                   _int(env, "LAB_LOOKUP_CONCURRENCY", 8, 1))


def _int(env, name: str, default: int, minimum: int) -> int:
    text = (env.get(name) or str(default)).strip()
    if not text.isdigit() or int(text) < minimum:
        raise ValueError(f"{name}={text!r}: give a whole number >= {minimum}")
    return int(text)


@dataclass(frozen=True)
class LookupResult:
    session: dict | None
    error: str | None
    attempts: int


class _Retry(Exception):
    """A failure that another attempt may fix: 5xx or a connection error."""


def lookup_sessions(session_ids, settings: LookupSettings) -> dict[str, LookupResult]:
    """session id -> LookupResult for every distinct id, within settings.timeout_s (+ ~0.25 s)."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return {}
    if not settings.token:
        reason = f"no lookup token: set {TOKEN_ENV}, or start the service, which writes it to {token_file()}"
        return {i: LookupResult(None, reason, 0) for i in ids}
    deadline = time.monotonic() + settings.timeout_s
    todo = deque(ids)  # the workers' popleft() is thread-safe
    results: dict[str, LookupResult] = {}
    lock = threading.Lock()
    workers = [threading.Thread(target=_worker, args=(todo, results, lock, settings, deadline), daemon=True,
                                name=f"lookup-{n}") for n in range(min(settings.concurrency, len(ids)))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()) + JOIN_GRACE_S)
    with lock:  # a worker stuck past the deadline (name resolution has no timeout) is left behind
        answered = dict(results)
    return {i: answered.get(i) or LookupResult(None, _timeout_reason(settings, 0), 0) for i in ids}


def _timeout_reason(settings: LookupSettings, attempts: int) -> str:
    return f"lookup timed out after {settings.timeout_s:.1f} s ({attempts} attempt{'' if attempts == 1 else 's'})"


def _worker(todo: deque, results: dict, lock: threading.Lock, settings: LookupSettings, deadline: float) -> None:
    """Take ids until none is left, on one keep-alive connection (after close() the next request opens it again)."""
    parts = urlsplit(settings.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port)
    try:
        while True:
            try:
                session_id = todo.popleft()
            except IndexError:
                return
            if not isinstance(session_id, str) or not session_id:
                result = LookupResult(None, f"no session id to look up ({session_id!r})", 0)
            else:
                try:
                    result = _lookup_one(connection, session_id, settings, deadline)
                except Exception as exc:  # a bug must cost one id its answer, not the whole call
                    result = LookupResult(None, f"lookup failed: {type(exc).__name__}: {exc}", 1)
            with lock:
                results[session_id] = result
    finally:
        connection.close()


def _lookup_one(connection: http.client.HTTPConnection, session_id: str, settings: LookupSettings,
                deadline: float) -> LookupResult:
    attempts = 0
    while (left := deadline - time.monotonic()) > 0:
        attempts += 1
        try:
            return _attempt(connection, session_id, settings, left, attempts)
        except TimeoutError:
            connection.close()
            break
        except _Retry as failure:
            if attempts > settings.retries:
                return LookupResult(None, str(failure), attempts)
            pause = BACKOFF_S[min(attempts - 1, len(BACKOFF_S) - 1)]
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))  # a backoff, capped by the deadline
    return LookupResult(None, _timeout_reason(settings, attempts), attempts)


def _attempt(connection: http.client.HTTPConnection, session_id: str, settings: LookupSettings, timeout_s: float,
             attempt: int) -> LookupResult:
    """One request, given only the time left. Returns the final result, raises _Retry (retryable) or TimeoutError."""
    connection.timeout = timeout_s  # when it connects
    if connection.sock is not None:
        connection.sock.settimeout(timeout_s)
    path = f"{urlsplit(settings.url).path.rstrip('/')}/sessions/{quote(session_id, safe='')}"
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {settings.token}",
                                                 "Accept": "application/json"})
        response = connection.getresponse()
        status, body = response.status, response.read()
    except TimeoutError:  # an OSError too, but not one to retry: the deadline has passed
        raise
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise _Retry(f"lookup service unreachable at {settings.url.rstrip('/')}: {exc or type(exc).__name__}; "
                     f"{START_HINT}") from None
    if status == 200:
        try:
            session = json.loads(body)
        except ValueError:
            session = None
        if isinstance(session, dict):
            return LookupResult(session, None, attempt)
        return LookupResult(None, "lookup failed: the service answered 200 without a JSON object", attempt)
    if status == 404:
        return LookupResult(None, "session not found (HTTP 404)", attempt)
    if status in (401, 403):
        return LookupResult(None, f"lookup unauthorized (HTTP {status}): set {TOKEN_ENV} to the service's token",
                            attempt)
    if status >= 500:
        raise _Retry(f"lookup failed: HTTP {status} after {attempt} attempt{'' if attempt == 1 else 's'}")
    return LookupResult(None, f"lookup failed: HTTP {status}", attempt)


def health_problem(url: str, timeout_s: float = 4.0) -> str | None:
    """None when the service at `url` is usable: /health answers 200 AND a session request without
    a token answers 401 (so a service that lets anyone in is not healthy). Else what is wrong."""
    base = url.rstrip("/")
    for path, wanted in (("/health", 200), ("/sessions/health-probe", 401)):
        parts = urlsplit(base + path)
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
        try:
            conn.request("GET", parts.path)
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            return f"{base}{path} does not answer ({exc}); {START_HINT}"
        finally:
            conn.close()
        if status != wanted:
            return f"{base}{path} answered HTTP {status}, expected {wanted}" + (
                ": it serves sessions without a token" if path != "/health" and status == 200 else "")
    return None
