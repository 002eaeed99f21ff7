"""The session lookup service (docs/lookup.md): a small real HTTP server over the sessions topic.

Why HTTP/1.1 with keep-alive: the client looks up many ids per micro-batch and reuses one
connection per thread. Why a token always: the lab never runs an open door, not even on 127.0.0.1.
"""
from __future__ import annotations

import hmac
import json
import os
import random
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from joinlab.broker import answers_as
from joinlab.lookup.config import TOKEN_ENV, default_port, token_file
from joinlab.lookup.store import SessionStore

HOST = "127.0.0.1"


class ServiceError(RuntimeError):
    """The service cannot start; the message says what to do."""


def resolve_token(token: str | None = None) -> tuple[str, str]:
    """(token, where it came from). Given, else $LAB_LOOKUP_TOKEN, else the token file (created
    owner-only with a new random token when missing). An empty token is refused, never 'no auth'."""
    if token is not None:
        if not token.strip():
            raise ServiceError("the lookup token is empty; the service refuses to run without one")
        return token.strip(), "given by the caller"
    if os.environ.get(TOKEN_ENV, "").strip():
        return os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    path = token_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
        try:
            os.link(draft, path)  # atomic, and never over a token another process just wrote
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    text = path.read_text().strip()
    if not text:
        raise ServiceError(f"the lookup token file {path} is empty: delete it (a new token is generated at the "
                           f"next start) or set {TOKEN_ENV}; the service refuses to run without a token")
    return text, str(path)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, service: "LookupService"):
        self.service = service
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address) -> None:
        """A client that hung up (its timeout passed) is normal here; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every response carries Content-Length
    server_version = "joinlab-lookup"
    timeout = 60  # an idle keep-alive connection frees its thread after a minute
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK on every keep-alive request (docs/benchmarks.md has the cost).
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        with self.server.service._lock:
            self.server.service.connections += 1

    def do_GET(self) -> None:
        status, body = self.server.service.answer(urlsplit(self.path).path, self.headers.get("Authorization", ""))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="joinlab-lookup"')
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # one line per request would drown the log
        pass


class LookupService:
    """The service in-process: `with LookupService(bootstrap, port=0) as svc: svc.url, svc.token`.
    Injected faults, for tests and demos (none by default): every response waits `latency_ms`; the
    first `fail_first` requests for each session id, and a seeded `error_rate` of them, answer 503."""

    def __init__(self, bootstrap: str, topic: str | None = None, port: int | None = None, host: str = HOST,
                 token: str | None = None, latency_ms: int = 0, fail_first: int = 0, error_rate: float = 0.0,
                 seed: int = 0):
        self.latency_ms, self.fail_first, self.error_rate = latency_ms, fail_first, error_rate
        self.token, self.token_source = resolve_token(token)
        self.store = SessionStore(bootstrap, topic)
        self._host, self._port = host, default_port() if port is None else port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._random = random.Random(seed)
        self._requests_per_id: dict[str, int] = {}
        self.in_flight = self.max_in_flight = self.requests = self.connections = 0
        self._server: _Server | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the one the system chose, for port 0)."""
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        host = HOST if self._host in ("0.0.0.0", "") else self._host
        return f"http://{host}:{self.port}"

    def start(self) -> "LookupService":
        try:
            self._server = _Server((self._host, self._port), self)
        except OSError as exc:
            raise ServiceError(f"cannot listen on {self._host}:{self._port} ({exc.strerror}): set LAB_LOOKUP_PORT "
                               "or pass --port to use another port, or stop what listens there") from None
        try:  # in seconds, not after the Kafka client's 30-s bootstrap timeout, when nothing listens
            if not answers_as(self.store.bootstrap, None, timeout_s=3.0):
                raise ConnectionError("nothing answers there")
            self.store.start()
        except Exception as exc:
            self._server.server_close()
            raise ServiceError(f"no Kafka broker answers at {self.store.bootstrap} ({exc}): start one with "
                               "`make broker-start` (or `make up`), or pass --bootstrap HOST:PORT") from None
        threading.Thread(target=self._server.serve_forever, args=(0.05,), name="lookup-http", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # ends injected delays at once
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        self.store.close()

    def __enter__(self) -> "LookupService":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def answer(self, path: str, authorization: str) -> tuple[int, dict]:
        """A GET's status and JSON body; /health (counts only, no data) needs no token."""
        if not path.startswith("/sessions/"):
            self._delay()
            if path == "/health":
                return 200, {"status": "ok", "sessions": self.store.sessions, "invalid": self.store.invalid}
            return 404, {"error": "no such path; use GET /sessions/<session_id> or GET /health"}
        with self._lock:  # session requests being answered, so that a test sees the client's concurrency
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._delay()
            scheme, _, given = authorization.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                return 401, {"error": "missing or wrong token: send Authorization: Bearer <token>"}
            session_id = unquote(path[len("/sessions/"):])
            with self._lock:
                seen = self._requests_per_id.get(session_id, 0)
                self._requests_per_id[session_id] = seen + 1
                failing = seen < self.fail_first or self._random.random() < self.error_rate
            if failing:
                return 503, {"error": "injected failure"}
            session = self.store.get(session_id)
            return (200, session) if session is not None else (404, {"error": "session not found"})
        finally:
            with self._lock:
                self.in_flight -= 1

    def _delay(self) -> None:
        if self.latency_ms:
            self._stopping.wait(self.latency_ms / 1000)
