"""The session lookup service and its client, on a real embedded broker and real HTTP (no Spark).

One broker for the module (sessions are produced once); each test starts its own service with the
faults it needs. Timing bounds are generous where the machine is shared, tight where the client
promises them (the whole call returns by its deadline).
"""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from joinlab.broker import EmbeddedBroker, free_port
from joinlab.lookup import LookupService, LookupSettings, ServiceError, health_problem, lookup_sessions
from joinlab.topics import create_topics, end_offsets, partitions_of, plain_consumer, producer
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "money-sessions"


def session(session_id: str, device: str = "ios") -> dict:
    return {"session_id": session_id, "user_id": 7, "country": "FR", "device": device,
            "event_time": "2024-05-01T10:00:00+00:00"}


SESSIONS = [session(f"s{n}") for n in range(40)]
FIRST = session("dup", device="ios")
INVALID = [b"not json", json.dumps({"session_id": "", "user_id": 1, "country": "FR", "device": "x",
                                    "event_time": "2024-05-01T10:00:00+00:00"}).encode(),
           json.dumps({"session_id": "no-user"}).encode()]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker whose sessions topic holds SESSIONS, a duplicate session id and invalid records."""
    with EmbeddedBroker(log_path=tmp_path_factory.mktemp("broker") / "broker.log") as running:
        bootstrap = running.bootstrap_servers
        create_topics(bootstrap, [TOPIC])
        client = producer(bootstrap)
        for value in [json.dumps(s).encode() for s in SESSIONS + [FIRST]] + INVALID \
                + [json.dumps(session("dup", device="android")).encode()]:
            client.send(TOPIC, value, key=b"k")  # one key: one partition, so "first" is well defined
        client.flush()
        client.close()
        consumer = plain_consumer(bootstrap)
        try:
            ends = {tp.partition: end for tp, end in end_offsets(consumer, partitions_of(consumer, [TOPIC])).items()}
        finally:
            consumer.close()
        yield bootstrap, ends


@contextmanager
def serving(broker, **kwargs):
    """A running service that has read the whole topic (waits on its consumed offsets)."""
    bootstrap, ends = broker
    with LookupService(bootstrap, port=0, token=kwargs.pop("token", "test-token"), **kwargs) as service:
        wait_for(lambda: service.store.caught_up_to(ends), 20, "the store to reach the topic's end")
        yield service


@pytest.fixture
def service(broker):
    with serving(broker) as running:
        yield running


def settings(service: LookupService, **overrides) -> LookupSettings:
    values = dict(url=service.url, token=service.token, timeout_s=3.0, retries=2, concurrency=4)
    values.update(overrides)
    return LookupSettings(**values)


def get(url: str, path: str, token: str | None = None) -> tuple[int, dict]:
    parts = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def lookup_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("lookup-") and t.name != "lookup-http"]


# --- The service ---------------------------------------------------------------------------------

def test_serves_the_first_valid_session_and_counts_invalid_records(service):
    assert service.store.sessions == len(SESSIONS) + 1 and service.store.invalid == len(INVALID)
    assert get(service.url, "/sessions/s3", service.token) == (200, session("s3"))
    assert get(service.url, "/sessions/dup", service.token) == (200, FIRST)  # a later record changes nothing


def test_unknown_session_is_404(service):
    assert get(service.url, "/sessions/nope", service.token) == (404, {"error": "session not found"})


def test_sessions_need_the_token(service):
    assert get(service.url, "/sessions/s3")[0] == 401
    assert get(service.url, "/sessions/s3", "wrong")[0] == 401
    parts = service.url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    conn.request("GET", "/sessions/s3", headers={"Authorization": f"Basic {service.token}"})
    assert conn.getresponse().status == 401
    conn.close()
    result = lookup_sessions(["s3"], settings(service, token="wrong"))["s3"]
    assert result.session is None and result.attempts == 1  # not retried
    assert result.error == "lookup unauthorized (HTTP 401): set LAB_LOOKUP_TOKEN to the service's token"


def test_health_answers_counts_without_a_token(service):
    assert get(service.url, "/health") == (200, {"status": "ok", "sessions": len(SESSIONS) + 1,
                                                 "invalid": len(INVALID)})
    assert health_problem(service.url) is None


def test_keep_alive_serves_many_requests_on_one_connection(service):
    parts = service.url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    for n in range(3):
        conn.request("GET", f"/sessions/s{n}", headers={"Authorization": f"Bearer {service.token}"})
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read()) == session(f"s{n}")
    conn.close()
    assert service.connections == 1


def test_an_empty_token_is_refused(broker):
    with pytest.raises(ServiceError, match="refuses to run without"):
        LookupService(broker[0], port=0, token=" ")


def test_the_token_file_is_created_owner_only_and_reused(broker, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    monkeypatch.delenv("LAB_LOOKUP_TOKEN", raising=False)
    first = LookupService(broker[0], port=0)
    path = tmp_path / "run" / "lookup.token"
    assert first.token_source == str(path) and path.read_text().strip() == first.token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first.token) >= 32
    assert LookupService(broker[0], port=0).token == first.token
    assert LookupSettings.from_env().token == first.token
    monkeypatch.setenv("LAB_LOOKUP_TOKEN", "from-env")
    assert LookupService(broker[0], port=0).token == "from-env" == LookupSettings.from_env().token
    monkeypatch.delenv("LAB_LOOKUP_TOKEN")
    path.write_text("\n")
    with pytest.raises(ServiceError, match="is empty: delete it"):
        LookupService(broker[0], port=0)


# --- The client ----------------------------------------------------------------------------------

def test_client_looks_up_each_distinct_id_once(service):
    results = lookup_sessions(["s1", "s2", "s1", "missing", "s2"], settings(service))
    assert list(results) == ["s1", "s2", "missing"] and service.requests == 3
    assert results["s1"].session == session("s1") and results["s1"].error is None and results["s1"].attempts == 1
    assert results["missing"].session is None and results["missing"].error == "session not found (HTTP 404)"
    assert results["missing"].attempts == 1  # a 404 is an answer, not retried
    assert lookup_sessions([""], settings(service))[""].error == "no session id to look up ('')"
    assert lookup_sessions([], settings(service)) == {} and lookup_threads() == []


def test_the_client_imports_nothing_heavy_and_starts_nothing():
    """Spark workers import it: no Kafka client, no pyspark, no thread at import."""
    code = ("import sys, threading; import joinlab.lookup; "
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('kafka', 'pyspark', 'jobs')]; "
            "assert not heavy and threading.active_count() == 1, (heavy, threading.enumerate())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert done.returncode == 0, done.stderr


def test_retries_succeed_after_a_first_failure(broker):
    with serving(broker, fail_first=1) as service:
        results = lookup_sessions(["s1", "s2"], settings(service))
    assert {k: (r.session, r.attempts) for k, r in results.items()} == {"s1": (session("s1"), 2),
                                                                        "s2": (session("s2"), 2)}


def test_gives_up_after_its_retries_with_the_reason(broker):
    with serving(broker, fail_first=10) as service:
        result = lookup_sessions(["s1"], settings(service, retries=2))["s1"]
        assert service.requests == 3
    assert result.session is None and result.attempts == 3
    assert result.error == "lookup failed: HTTP 503 after 3 attempts"


def test_a_seeded_error_rate_fails_requests(broker):
    with serving(broker, error_rate=1.0, seed=3) as service:
        result = lookup_sessions(["s1"], settings(service, retries=0))["s1"]
    assert result.error == "lookup failed: HTTP 503 after 1 attempt" and result.attempts == 1


def test_the_whole_call_returns_by_its_timeout(broker):
    with serving(broker, latency_ms=20_000) as service:
        ids = [f"s{n}" for n in range(12)]
        began = time.monotonic()
        results = lookup_sessions(ids, settings(service, timeout_s=1.0, concurrency=4))
        took = time.monotonic() - began
        assert lookup_threads() == [], "worker threads left running after the call returned"
    assert 1.0 <= took < 1.5, f"the call took {took:.2f} s for a 1-s timeout"
    assert set(results) == set(ids)
    reasons = {r.error for r in results.values()}
    assert reasons <= {"lookup timed out after 1.0 s (1 attempt)", "lookup timed out after 1.0 s (0 attempts)"}
    assert sum(r.attempts for r in results.values()) == 4  # 4 in flight; the rest never started


def test_each_attempt_gets_only_the_time_left(broker):
    """One worker, 0.4 s per answer, a 1-s budget: two answers, then the third request is cut at the
    deadline (a per-attempt timeout of 1 s would end the call at ~1.8 s)."""
    with serving(broker, latency_ms=400) as service:
        began = time.monotonic()
        results = lookup_sessions(["s1", "s2", "s3", "s4"], settings(service, timeout_s=1.0, concurrency=1))
        took = time.monotonic() - began
        assert lookup_threads() == [], "worker threads left running after the call returned"
    assert took < 1.5, f"the call took {took:.2f} s for a 1-s timeout"
    assert [(r.session is not None, r.attempts) for r in results.values()] == [(True, 1), (True, 1), (False, 1),
                                                                               (False, 0)]
    assert results["s4"].error == "lookup timed out after 1.0 s (0 attempts)"


def test_concurrency_is_bounded_and_reached_on_reused_connections(broker):
    with serving(broker, latency_ms=100) as service:
        results = lookup_sessions([f"s{n}" for n in range(24)], settings(service, concurrency=4))
        assert all(r.session for r in results.values())
        assert service.max_in_flight == 4, f"{service.max_in_flight} requests were in flight at once"
        assert service.connections == 4, "each worker thread should reuse its keep-alive connection"
    assert lookup_threads() == []


def test_an_unreachable_service_is_named_with_what_to_do():
    url = f"http://127.0.0.1:{free_port()}"
    result = lookup_sessions(["s1"], LookupSettings(url, "t", timeout_s=2.0, retries=1))["s1"]
    assert result.attempts == 2 and result.error.startswith(f"lookup service unreachable at {url}: ")
    assert result.error.endswith("is it running? (`make up` or `python -m joinlab.lookup`)")
    assert "does not answer" in health_problem(url)


def test_settings_from_the_environment(tmp_path):
    env = {"LAB_HOME": str(tmp_path)}
    assert LookupSettings.from_env(env) == LookupSettings("http://127.0.0.1:8090", "", 2.0, 2, 8)
    env.update(LAB_LOOKUP_PORT="9001", LAB_LOOKUP_TOKEN="t", LAB_LOOKUP_TIMEOUT="500 ms",
               LAB_LOOKUP_RETRIES="0", LAB_LOOKUP_CONCURRENCY="3")
    assert LookupSettings.from_env(env) == LookupSettings("http://127.0.0.1:9001", "t", 0.5, 0, 3)
    assert "'t'" not in repr(LookupSettings.from_env(env)), "the token must not show in logs"
    assert LookupSettings.from_env({**env, "LAB_LOOKUP_URL": "http://lookup:8090"}).url == "http://lookup:8090"
    for name, bad in [("LAB_LOOKUP_TIMEOUT", "2"), ("LAB_LOOKUP_TIMEOUT", "0 s"), ("LAB_LOOKUP_RETRIES", "-1"),
                      ("LAB_LOOKUP_CONCURRENCY", "0"), ("LAB_LOOKUP_URL", "lookup:8090"),
                      ("LAB_LOOKUP_PORT", "http")]:
        with pytest.raises(ValueError, match=name):
            LookupSettings.from_env({**env, name: bad})


def test_without_a_token_nothing_is_sent_and_the_reason_says_what_to_do(tmp_path):
    result = lookup_sessions(["s1"], LookupSettings.from_env({"LAB_HOME": str(tmp_path)}))["s1"]
    assert result.attempts == 0 and result.error.startswith("no lookup token: set LAB_LOOKUP_TOKEN")


# --- The command line ----------------------------------------------------------------------------

def run_cli(*args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joinlab.lookup", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env or os.environ, timeout=timeout)


@pytest.mark.timeout(60)
def test_cli_serves_logs_one_line_and_stops_on_sigterm(broker, tmp_path):
    env = {**os.environ, "LAB_HOME": str(tmp_path)}
    env.pop("LAB_LOOKUP_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "joinlab.lookup", "--bootstrap", broker[0], "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        line = proc.stdout.readline()
        assert "lookup: serving sessions of money-sessions" in line, line + proc.stderr.read()
        assert f"token in {tmp_path / 'run' / 'lookup.token'}" in line
        url = re.search(r" at (http://127\.0\.0\.1:\d+) ", line).group(1)
        token = (tmp_path / "run" / "lookup.token").read_text().strip()
        assert token not in line
        wait_for(lambda: get(url, "/health")[1]["sessions"] == len(SESSIONS) + 1, 20, "the CLI's store to load")
        assert get(url, "/sessions/s5", token) == (200, session("s5"))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert proc.returncode == 0 and "lookup: stopped" in proc.stdout.read()


def test_cli_errors_say_what_to_do(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "LAB_LOOKUP_TOKEN")}
    env["LAB_HOME"] = str(tmp_path)  # no background broker here
    done = run_cli(env=env)
    assert done.returncode == 2 and "run `make broker-start`" in done.stderr and "--bootstrap" in done.stderr
    done = run_cli("--bootstrap", f"127.0.0.1:{free_port()}", "--port", "0", env=env)
    assert done.returncode == 2 and "no Kafka broker answers at" in done.stderr and "make broker-start" in done.stderr
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        done = run_cli("--bootstrap", "127.0.0.1:9", "--port", str(squatter.getsockname()[1]), env=env)
    assert done.returncode == 2 and "set LAB_LOOKUP_PORT or pass --port" in done.stderr
    done = run_cli("--error-rate", "1.5", env=env)
    assert done.returncode == 2 and "1.5 is not between 0 and 1" in done.stderr
    done = run_cli("--bootstrap", "x:1", env={**env, "LAB_LOOKUP_PORT": "web"})
    assert done.returncode == 2 and "LAB_LOOKUP_PORT='web' is not a port number" in done.stderr
