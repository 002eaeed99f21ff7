"""Pure-logic tests of money enrichment's two stages and its lookup step, with pyspark's in-memory
TwsTester: no Spark session, no broker, no HTTP. `Pipeline` runs them as the query does, one
micro-batch at a time: each stage takes the batch's input first, then fires its timers (Spark's
order), and the lookup step answers from the sessions the test knows."""
import json
import random
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from pyspark.sql import Row

from generators.money_enrichment import generate
from jobs.money_enrichment.in_memory import InMemory as MoneyEnrichment
from jobs.money_enrichment.job import ENRICHED_TOPIC, SESSIONS_TOPIC, TRANSACTIONS_TOPIC, USERS_TOPIC
from jobs.money_enrichment.rules import BY_LOOKUP, BY_STREAM, Settings, settings
from jobs.money_enrichment.given import (DEAD, ENRICHED, EVENT_COLUMNS, SESSION, SESSION_START, TX, USER,
                                          USER_UPDATE, UserTxs)
from jobs.money_enrichment.solution import Joining
from joinlab.kit.events import micros, moment
from joinlab.generate import Disorder, Record, arrive_first, iso
from joinlab.kit.typed_state import load
from references import money_enrichment as reference
from tests.conftest import checkpoint_declaring, random_batches

CONFIG = Settings(watermark_delay_ms=10_000, session_duration_ms=120_000, wait_limit_ms=30_000,
                  dedup_horizon_ms=600_000)
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def Pipeline(config: Settings = CONFIG, sessions: dict | None = None, users: list[Row] = ()) -> MoneyEnrichment:
    """Stage 1 -> stage 2 -> lookup step (joinlab.kit.in_memory); the lookup service knows `sessions`."""
    return MoneyEnrichment(config=config, sessions=sessions if sessions is not None else {}, users=users)


def at(seconds: float) -> int:
    """Microseconds of T0 + seconds."""
    return micros(T0 + timedelta(seconds=seconds))


def ms(seconds: float) -> int:
    return at(seconds) // 1000


def row(**fields) -> Row:
    values = dict.fromkeys(EVENT_COLUMNS)
    values.update(fields)
    return Row(**values)


def tx(tx_id, user, session, s, kind="payment", amount=10.0) -> Row:
    return row(entity=SESSION, entity_id=session, kind=TX, tx_id=tx_id, user_id=user, session_id=session,
               amount=amount, currency="EUR", type=kind, t_us=at(s))


def start(session, user, s, country="PL", device="ios") -> Row:
    return row(entity=SESSION, entity_id=session, kind=SESSION_START, session_id=session, user_id=user,
               country=country, device=device, t_us=at(s))


def update(user, version, s, segment="gold", name="Ada", country="PL") -> Row:
    return row(entity=USER, entity_id=str(user), kind=USER_UPDATE, user_id=user, name=name, country=country,
               segment=segment, version=version, t_us=at(s))


def enriched(out) -> dict[str, dict]:
    """tx_id -> its last enriched record (the changelog's current value)."""
    return {r["tx_id"]: r for r in out if r["kind"] == ENRICHED}


def session_of(session_id, user, s, country="PL", device="ios") -> dict:
    return {"session_id": session_id, "user_id": user, "country": country, "device": device,
            "event_time": iso(T0 + timedelta(seconds=s))}


def joining(p, session_id) -> Joining:
    """Stage 1's state of a session (empty when it holds none)."""
    return load(Joining, p.join.peekValueState("joining", (SESSION, session_id))) or Joining(None, None, [], [])


def user_txs(p, user) -> UserTxs:
    """Stage 2's transactions of a user (empty when it holds none)."""
    return load(UserTxs, p.enrich.peekValueState("txs", (USER, str(user)))) or UserTxs(None, [], [], [], None)


def ids(txs) -> list[str]:
    return [t.tx_id for t in txs]


# --- Sessions: waiting, expiry, lookups ------------------------------------------------------------

def test_a_transaction_before_its_session_waits_in_state_and_joins_when_the_session_comes():
    p = Pipeline()
    assert p.batch([tx("t1", 1, "s1", 5)]) == []
    assert ids(joining(p, "s1").waiting) == ["t1"]
    p.batch([start("s1", 1, 4, country="DE")], watermark=ms(1))
    out = p.batch([], watermark=ms(6))
    assert [(r["tx_id"], r["session_country"], r["enriched_by"]) for r in out] == [("t1", "DE", BY_STREAM)]
    assert joining(p, "s1").waiting == []


def test_a_transaction_whose_session_never_comes_leaves_state_after_the_wait_limit_and_is_looked_up():
    p = Pipeline(sessions={"s9": session_of("s9", 1, 0, country="FR")})
    p.batch([tx("t1", 1, "s9", 5)], watermark=ms(1))
    assert p.batch([], watermark=ms(34)) == [] and p.lookups == []  # 5 s + 30 s wait limit not passed yet
    out = p.batch([], watermark=ms(35))
    assert [(r["tx_id"], r["session_country"], r["enriched_by"]) for r in out] == [("t1", "FR", BY_LOOKUP)]
    assert p.lookups == ["s9"]
    assert joining(p, "s9").waiting == []


def test_session_state_expires_with_the_watermark_and_a_later_transaction_is_looked_up():
    p = Pipeline(sessions={"s1": session_of("s1", 1, 0, country="DE")})
    p.batch([start("s1", 1, 0, country="DE")], watermark=ms(0) - 1)
    p.batch([], watermark=ms(119))
    assert joining(p, "s1").session is not None
    p.batch([], watermark=ms(120))  # start + 2 minutes
    assert joining(p, "s1").session is None
    out = p.batch([tx("t1", 1, "s1", 100)], watermark=ms(200))  # 100 s + 30 s wait limit is behind 200 s
    assert [(r["tx_id"], r["session_country"], r["enriched_by"]) for r in out] == [("t1", "DE", BY_LOOKUP)]


def test_a_failed_lookup_becomes_a_dead_letter_with_its_reason():
    p = Pipeline(sessions={})
    out = p.batch([tx("t1", 1, "gone", 5)], watermark=ms(100))
    assert [(r["kind"], r["tx_id"], r["reason"]) for r in out] == [(DEAD, "t1", "session not found (HTTP 404)")]


# --- Dedup -----------------------------------------------------------------------------------------

def test_duplicates_within_the_horizon_are_dropped_and_the_ids_leave_state_after_it():
    p = Pipeline()
    p.batch([start("s1", 1, 0), tx("t1", 1, "s1", 1), tx("t1", 1, "s1", 1)], watermark=ms(0) - 1)
    p.batch([tx("t1", 1, "s1", 1)], watermark=ms(300))  # a re-send, 5 minutes later: within 10 minutes
    assert sum(r["tx_id"] == "t1" for r in p.batch([], watermark=ms(400))) == 0
    assert ids(joining(p, "s1").seen) == ["t1"]
    p.batch([], watermark=ms(659))  # 1 s + 10 minutes passed, but clean-up runs on whole minutes
    assert ids(joining(p, "s1").seen) == ["t1"]
    p.batch([], watermark=ms(660))
    assert joining(p, "s1").seen == []


def test_a_different_transaction_under_a_seen_tx_id_is_a_dead_letter_not_a_silent_drop():
    p = Pipeline()
    out = p.batch([start("s1", 1, 0), tx("t1", 1, "s1", 1, amount=10.0), tx("t1", 1, "s1", 1, amount=99.0)],
                  watermark=ms(0) - 1)
    assert [(r["kind"], r["amount"]) for r in out] == [(DEAD, 99.0)]
    assert out[0]["reason"].startswith("conflicting duplicate")


# --- The original's bugs -----------------------------------------------------------------------------

def test_two_transactions_of_one_user_in_the_same_millisecond_are_both_kept():
    """The original keyed its buffer by timestamp: the second overwrote the first."""
    p = Pipeline()
    p.batch([start("s1", 1, 0), tx("a", 1, "s1", 5, kind="payment"), tx("b", 1, "s1", 5, kind="payment")],
            watermark=ms(0) - 1)
    assert len(user_txs(p, 1).pending) == 2
    got = enriched(p.batch([], watermark=ms(5)))
    assert set(got) == {"a", "b"}
    assert (got["a"]["first_of_type"], got["b"]["first_of_type"]) == (True, False)  # a tie: the smaller tx_id


def test_two_updates_of_one_user_in_the_same_millisecond_are_both_kept_and_the_higher_version_wins():
    p = Pipeline()
    p.batch([update(1, 3, 2, segment="gold"), update(1, 2, 2, segment="silver"), start("s1", 1, 0),
             tx("t1", 1, "s1", 5)], watermark=ms(0) - 1)
    assert len(p.enrich.peekMapState("users", (USER, "1"))) == 2
    got = enriched(p.batch([], watermark=ms(5)))
    assert (got["t1"]["user_version"], got["t1"]["user_segment"]) == (3, "gold")


def test_user_info_with_the_same_timestamp_as_the_transaction_is_applied():
    """The original compared with '<': an update in the transaction's millisecond never applied."""
    p = Pipeline()
    p.batch([update(1, 1, 0, segment="new"), start("s1", 1, 0), tx("t1", 1, "s1", 5),
             update(1, 2, 5, segment="vip"), update(1, 3, 5.001, segment="later")], watermark=ms(0) - 1)
    got = enriched(p.batch([], watermark=ms(10)))
    assert (got["t1"]["user_version"], got["t1"]["user_segment"]) == (2, "vip")


# --- As of, first of type, corrections --------------------------------------------------------------------

def test_the_user_is_taken_as_of_the_transaction_time_whatever_arrived_first():
    early, late = update(1, 1, 1, segment="basic"), update(1, 2, 8, segment="gold")
    txs = [start("s1", 1, 0), tx("t1", 1, "s1", 5), tx("t2", 1, "s1", 9)]
    results = []
    for order in ([early, late, *txs], [*txs, late, early], [late, *txs, early]):
        p = Pipeline()
        p.batch(order[:2], watermark=ms(0) - 1)
        p.batch(order[2:], watermark=ms(0))
        got = enriched(p.batch([], watermark=ms(20)))
        results.append({k: (v["user_version"], v["user_segment"]) for k, v in got.items()})
    assert results[0] == results[1] == results[2] == {"t1": (1, "basic"), "t2": (2, "gold")}


def test_first_of_type_is_by_event_time_and_a_late_earlier_transaction_corrects_the_old_first():
    p = Pipeline()
    first = p.batch([start("s1", 1, 0), tx("b", 1, "s1", 20, kind="deposit"), tx("c", 1, "s1", 21, kind="payment")],
                    watermark=ms(0) - 1)
    first += p.batch([], watermark=ms(25))
    assert {r["tx_id"]: r["first_of_type"] for r in first} == {"b": True, "c": True}
    out = p.batch([tx("a", 1, "s1", 10, kind="deposit")], watermark=ms(26))  # behind the watermark
    assert [(r["tx_id"], r["first_of_type"]) for r in out] == [("b", False), ("a", True)]


def test_a_late_user_update_re_emits_the_decided_transactions_it_changes():
    p = Pipeline()
    p.batch([update(1, 1, 0, segment="basic"), start("s1", 1, 0), tx("t1", 1, "s1", 5), tx("t2", 1, "s1", 15)],
            watermark=ms(0) - 1)
    decided = enriched(p.batch([], watermark=ms(20)))
    assert {k: v["user_segment"] for k, v in decided.items()} == {"t1": "basic", "t2": "basic"}
    out = p.batch([update(1, 2, 10, segment="gold")], watermark=ms(21))
    assert [(r["tx_id"], r["user_segment"], r["user_version"]) for r in out] == [("t2", "gold", 2)]


def test_initial_state_from_a_users_snapshot_enriches_before_any_user_update_is_read():
    snapshot = [Row(entity=USER, entity_id="1", user_id=1, t_us=at(-3600), name="Old", country="SE",
                    segment="legacy", version=7)]
    p = Pipeline(users=snapshot)
    p.batch([start("s1", 1, 0), tx("t1", 1, "s1", 5)], watermark=ms(0) - 1)
    got = enriched(p.batch([], watermark=ms(10)))
    assert (got["t1"]["user_name"], got["t1"]["user_version"]) == ("Old", 7)


# --- Convergence -------------------------------------------------------------------------------------------

def stage_rows(records) -> list[Row]:
    """Valid input records as the rows stage 1 gets (duplicates included)."""
    return Pipeline().rows(records)


def as_views(out) -> dict:
    """The pipeline's last record per tx_id, as the reference's views (without enriched_by)."""
    views = {}
    for tx_id, r in enriched(out).items():
        views[tx_id] = {"tx_id": tx_id, "user_id": r["user_id"], "session_id": r["session_id"],
                        "amount": float(r["amount"]), "currency": r["currency"], "type": r["type"],
                        "event_time": moment(r["t_us"]), "session_country": r["session_country"],
                        "session_device": r["session_device"], "session_started_at": moment(r["session_start_us"]),
                        "user_name": r["user_name"], "user_country": r["user_country"],
                        "user_segment": r["user_segment"], "user_version": r["user_version"],
                        "first_of_type": r["first_of_type"]}
    return views


def sessions_in(records) -> dict:
    return {s["session_id"]: s for s in reference._first_read(records, SESSIONS_TOPIC, "session_id").values()}


@pytest.fixture
def job_settings(monkeypatch):
    for name, value in {"MONEY_WATERMARK_DELAY": "10 seconds", "MONEY_SESSION_DURATION": "2 minutes",
                        "MONEY_WAIT_LIMIT": "30 seconds", "MONEY_DEDUP_HORIZON": "10 minutes"}.items():
        monkeypatch.setenv(name, value)
    assert settings() == CONFIG


@pytest.mark.parametrize("seed,max_delay_s", [(0, 4.0), (1, 8.0), (2, 30.0), (3, 90.0)])
def test_random_batches_of_disordered_events_converge_to_the_reference(job_settings, seed, max_delay_s):
    """Any disorder: delays within the watermark delay (4, 8 s) and far beyond it (30, 90 s: late
    sessions, users and transactions), plus very late transactions that must be looked up."""
    records = generate(seed, 4000, users=40, very_late=0.05, late_by_s=140,
                       disorder=Disorder(delayed=0.4, max_delay_s=max_delay_s, duplicates=0.1, malformed=0.02))
    p = Pipeline(sessions=sessions_in(records))
    out = p.run(random_batches(stage_rows(records), random.Random(seed)))
    want = reference.expected(records)
    assert len(want) > 1000 and sum(v["first_of_type"] for v in want.values()) > 100
    assert as_views(out) == want
    assert p.lookups, "very late transactions must take the lookup path"
    assert not [r for r in out if r["kind"] == DEAD]


def test_which_topic_is_read_first_does_not_change_the_final_records(job_settings):
    """Every transaction before any session or user, and the other way round (a watermark delay longer
    than the stream, and a last event far ahead to decide everything)."""
    records = generate(5, 1500, users=30, very_late=0.0)
    far = {"user_id": 999, "name": "Clock", "country": "PL", "segment": "x", "version": 1,
           "event_time": "2026-01-01T09:00:00Z"}
    clock = Record(USERS_TOPIC, b"999", json.dumps(far).encode(), "event")
    config = Settings(7 * 3600_000, 120_000, 30_000, 600_000)
    results = []
    for first in (None, TRANSACTIONS_TOPIC, USERS_TOPIC):
        ordered = (records if first is None else arrive_first(records, [first])) + [clock]
        p = Pipeline(config, sessions=sessions_in(records))
        results.append(as_views(p.run(random_batches(stage_rows(ordered), random.Random(5)))))
    assert results[0] == results[1] == results[2] == reference.expected(records + [clock], config)
    assert len(results[0]) > 500


def test_settings_come_from_the_environment_and_bad_values_say_what_to_give(monkeypatch):
    monkeypatch.setenv("MONEY_WAIT_LIMIT", "45 s")
    monkeypatch.setenv("MONEY_USERS_SNAPSHOT", "/tmp/users.jsonl")
    assert settings().wait_limit_ms == 45_000 and settings().users_snapshot == "/tmp/users.jsonl"
    monkeypatch.setenv("MONEY_DEDUP_HORIZON", "soon")
    with pytest.raises(ValueError, match="MONEY_DEDUP_HORIZON='soon': give a whole number and a unit"):
        settings()


# --- State and its bounds ---------------------------------------------------------------------------

def test_every_stage_s_state_leaves_as_the_watermark_passes_and_only_the_newest_old_user_version_stays():
    """Session: start + session duration; waiting: time + wait limit; seen and decided: time +
    dedup horizon; pending: its time; users: versions older than the horizon but the newest.
    Only firsts (one per user and money type) and that one version per user stay for good."""
    p = Pipeline(sessions={"gone": session_of("gone", 1, 0)})
    p.batch([update(1, v, v, segment=f"s{v}") for v in (1, 2, 3)] +
            [start("s1", 1, 0), tx("t1", 1, "s1", 5), tx("w1", 1, "gone", 6)], watermark=ms(0) - 1)
    assert len(p.enrich.peekMapState("users", (USER, "1"))) == 3
    p.batch([], watermark=ms(700))  # every clean-up due: 3 s + 10 min, on a whole minute
    p.batch([], watermark=ms(720))
    for var in ("waiting", "seen"):
        assert getattr(joining(p, "s1"), var) == [] and getattr(joining(p, "gone"), var) == []
    assert joining(p, "s1").session is None
    for var in ("pending", "decided"):
        assert getattr(user_txs(p, 1), var) == []
    assert list(p.enrich.peekMapState("users", (USER, "1"))) == [(3,)]
    assert [t.type for t in user_txs(p, 1).firsts] == ["payment"]
    got = enriched(p.batch([tx("t2", 1, "s2", 800), start("s2", 1, 799)]) + p.batch([], watermark=ms(800)))
    assert (got["t2"]["user_version"], got["t2"]["user_segment"]) == (3, "s3")  # the newest old version serves


def test_the_notes_count_a_replayed_record_as_a_duplicate_and_a_changed_one_as_a_correction():
    """After a restart the at-least-once sink writes a replayed batch's records again, identical:
    the verifier's notes count them apart from corrections (a newer record for the same tx_id)."""
    def out(tx_id, **fields):
        body = {"tx_id": tx_id, "enriched_by": BY_STREAM, "first_of_type": True, **fields}
        return Record(ENRICHED_TOPIC, tx_id.encode(), json.dumps(body).encode(), "event")

    replayed, corrected = out("a"), out("b", first_of_type=False)
    looked_up = out("c", enriched_by=BY_LOOKUP)
    records = [out("a"), out("b"), looked_up, replayed, corrected, looked_up]
    assert reference.notes(records) == ["3 transactions: 2 enriched from state, 1 by lookup; "
                                        "1 corrections, 2 re-emitted duplicates (same key, same content)"]


# --- State layout ------------------------------------------------------------------------------------------

def test_a_checkpoint_of_an_earlier_state_layout_of_either_stage_is_refused_and_a_candidate_s_names_are_not(tmp_path):
    import jobs.money_enrichment.parts as money
    from joinlab.runner import CheckpointError, check_state_layout
    check_state_layout(money, checkpoint_declaring(tmp_path / "now", ["joining"], ["users", "txs"]))
    candidate = SimpleNamespace(SessionJoin=object)  # a candidate's module: its own state names
    check_state_layout(money, checkpoint_declaring(tmp_path / "theirs", ["pending", "seen"], ["users", "txs"]), candidate)
    with pytest.raises(CheckpointError, match=r"'seen', 'session', 'waiting'.*--reset"):
        check_state_layout(money, checkpoint_declaring(tmp_path / "old", ["session", "waiting", "seen"], ["users", "txs"]))
    with pytest.raises(CheckpointError, match=r"'decided', 'firsts', 'pending'.*--reset"):
        check_state_layout(money, checkpoint_declaring(tmp_path / "old-given", ["pending"], ["users", "pending", "decided",
                                                                                   "firsts"]), candidate)


# --- State round trips per key and batch --------------------------------------------------------------

def _calls(n: int) -> dict:
    """Each stage's state and timer calls (Spark's per-call ones included) while one user has `n`
    transactions in a session that came first and `n` waiting for one that comes a batch later,
    all decided, then every piece of state leaves."""
    from tests.state_calls import count
    p = Pipeline()
    calls = {"join": count(p.join), "enrich": count(p.enrich)}
    out = p.batch([update(1, 1, 0), start("s1", 1, 0)] + [tx(f"a{i}", 1, "s1", 1 + i / 100) for i in range(n)] +
                  [tx(f"b{i}", 1, "s2", 2 + i / 100) for i in range(n)], watermark=ms(0) - 1)
    out += p.batch([start("s2", 1, 1)], watermark=ms(1))
    out += p.batch([], watermark=ms(5))
    p.batch([], watermark=ms(720))
    assert len(enriched(out)) == 2 * n
    return calls


def test_each_stage_makes_the_same_state_calls_per_key_and_batch_however_many_events_the_key_has():
    one, many = _calls(1), _calls(30)
    assert many == one
