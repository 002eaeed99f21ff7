"""Money enrichment end to end: generator -> Kafka -> Spark job, calling the lab's session lookup
service over real HTTP -> Kafka -> verifier. Real parts only."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import jobs.money_enrichment.parts as money
import jobs.money_enrichment.job as money_query
from generators.money_enrichment import generate
from jobs.money_enrichment.given import USER_SCHEMA, UserEnrich
from joinlab import checkpoint_state as state, cli
from joinlab import runner
from joinlab.kit.events import micros
from joinlab.generate import Disorder, Record, send
from joinlab.lookup import LookupService
from tests.spark_rows import read_records
from joinlab.topics import create_topics, read_topics
from joinlab.verify import verify
from references import money_enrichment as reference
from tests.conftest import run_job_to_end, wait_for

pytestmark = pytest.mark.spark

DISORDER = Disorder(delayed=0.4, max_delay_s=4.0, duplicates=0.1, malformed=0.02)


def setup_topics(bootstrap):
    create_topics(bootstrap, money.INPUT_TOPICS + money.OUTPUT_TOPICS)


def use_service(monkeypatch, service: LookupService, **settings: str) -> None:
    """Point the job (built in this process) at `service`."""
    monkeypatch.setenv("LAB_LOOKUP_URL", service.url)
    monkeypatch.setenv("LAB_LOOKUP_TOKEN", service.token)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


def outputs(bootstrap, after: set = frozenset()) -> list:
    return [r for r in read_topics(bootstrap, [money.ENRICHED_TOPIC])
            if (r.topic, r.partition, r.offset) not in after]


def positions(records) -> set:
    return {(r.topic, r.partition, r.offset) for r in records}


def enriched_by(records) -> dict[str, str]:
    """tx_id -> how its last record got its session (stream or lookup)."""
    return {json.loads(r.value)["tx_id"]: json.loads(r.value)["enriched_by"] for r in records}


def in_chunks(records, n):
    size = -(-len(records) // n)
    return [records[i:i + size] for i in range(0, len(records), size)]


def data_batches(query) -> int:
    return sum(p.numInputRows > 0 for p in query.recentProgress)


def session_gone_on_arrival(records, session_s: int) -> set[str]:
    """The transactions that arrived after events 10 s (the watermark delay) past their session's
    end: by then the session could have left the job's state (it has, if a micro-batch ended
    between them)."""
    starts, newest, gone = {}, None, set()
    for r in records:
        if r.kind not in ("event", "duplicate"):
            continue
        body = json.loads(r.value)
        t = micros(body["event_time"])
        if r.topic == money.SESSIONS_TOPIC:
            starts.setdefault(body["session_id"], t)
        elif r.topic == money.TRANSACTIONS_TOPIC and body["session_id"] in starts and newest is not None:
            if newest - 10_000_000 >= starts[body["session_id"]] + session_s * 1_000_000:
                gone.add(body["tx_id"])
        newest = t if newest is None else max(newest, t)
    return gone


def test_live_and_backfill_end_with_the_same_records_and_both_equal_the_reference(spark, bootstrap, tmp_path,
                                                                                    monkeypatch):
    """Live: the job runs while the topics fill (four chunks, each sent once the job has read the
    last), so very late transactions find their session gone and are looked up (every lookup needs
    a retry here: the service fails each session's first request). Backfill: a fresh checkpoint
    reads everything at once. The final record of every tx_id is the same; only `enriched_by`
    differs, and only on transactions the live job saw late."""
    setup_topics(bootstrap)
    records = generate(11, 2000, users=40, session_seconds=30, very_late=0.05, late_by_s=60, disorder=DISORDER)
    with LookupService(bootstrap, topic=money.SESSIONS_TOPIC, port=0, fail_first=1) as service:
        use_service(monkeypatch, service, MONEY_SESSION_DURATION="30 seconds")
        live = runner.start(spark, money, bootstrap, str(tmp_path / "live"), trigger_interval="500 milliseconds")
        try:
            for chunk in in_chunks(records, 4):  # each sent while the job runs, once it has read the last
                read_so_far = data_batches(live)
                send(bootstrap, chunk, progress=False)
                wait_for(lambda: data_batches(live) > read_so_far, 180, "a micro-batch reading the new records")
            wait_for(lambda: live.lastProgress.numInputRows == 0, 120,
                     "the no-data micro-batch that moves the watermark past the last records")
        finally:
            live.stop()
        live_batches = data_batches(live)
        live_out = outputs(bootstrap)
        run_job_to_end(spark, money, bootstrap, tmp_path / "backfill")
        backfill_out = outputs(bootstrap, after=positions(live_out))
        requests, looked_up = service.requests, {json.loads(r.value)["session_id"] for r in live_out
                                                 if json.loads(r.value)["enriched_by"] == "lookup"}

    inputs = read_topics(bootstrap, money.INPUT_TOPICS)
    want = reference.expected(inputs)
    assert live_batches >= 4, "the live job should have read the topics while they filled"
    assert reference.actual(live_out) == reference.actual(backfill_out) == want
    assert len(want) > 900 and sum(v["first_of_type"] for v in want.values()) > 100

    live_by, backfill_by = enriched_by(live_out), enriched_by(backfill_out)
    lookups = {tx for tx, method in live_by.items() if method == "lookup"}
    assert lookups, "very late transactions should have been looked up"
    assert {tx for tx, method in backfill_by.items() if method == "lookup"} == set()  # one batch: nothing late
    assert lookups <= session_gone_on_arrival(records, 30), "only transactions whose session had expired"
    assert requests >= 2 * len(looked_up), "each session's first request failed, so each needed a retry"

    letters = read_topics(bootstrap, [money.DEAD_LETTERS_TOPIC])
    malformed = sum(r.kind not in ("event", "duplicate") for r in records)
    assert len(letters) == 2 * malformed  # each run dead-letters them once
    report = verify("money-enrichment", bootstrap)
    assert report.ok, "\n".join(report.lines())


T0 = "2026-01-01T00:{:02d}:{:06.3f}Z"


def at(seconds: float) -> str:
    return T0.format(int(seconds // 60), seconds % 60)


def event(topic: str, key, **body) -> Record:
    return Record(topic, str(key).encode(), json.dumps(body).encode(), "event")


def tx(tx_id, session, seconds, user=1, kind="payment"):
    return event(money.TRANSACTIONS_TOPIC, tx_id, tx_id=tx_id, user_id=user, session_id=session, amount=12.5,
                 currency="EUR", type=kind, event_time=at(seconds))


def session(session_id, user, seconds):
    return event(money.SESSIONS_TOPIC, session_id, session_id=session_id, user_id=user, country="PL", device="ios",
                 event_time=at(seconds))


def user(user_id, version, seconds, name="Ada", segment="gold"):
    return event(money.USERS_TOPIC, user_id, user_id=user_id, name=name, country="PL", segment=segment,
                 version=version, event_time=at(seconds))


def test_a_lookup_that_times_out_is_dead_lettered_without_blocking_the_stream(spark, bootstrap, tmp_path,
                                                                               monkeypatch):
    """The service answers only after 60 s; the job's lookup timeout is 1 s. A late transaction's
    dead letter (with the reason) must appear long before the service would have answered, the
    query stays active, and a malformed record is dead-lettered beside it."""
    setup_topics(bootstrap)
    with LookupService(bootstrap, topic=money.SESSIONS_TOPIC, port=0, latency_ms=60_000) as service:
        use_service(monkeypatch, service, LAB_LOOKUP_TIMEOUT="1 second", LAB_LOOKUP_RETRIES="2")
        query = runner.start(spark, money, bootstrap, str(tmp_path / "cp"), trigger_interval="500 milliseconds")
        try:
            send(bootstrap, [user(1, 1, 0), session("s1", 1, 0), tx("on-time", "s1", 5), session("clock", 2, 400)],
                 progress=False)
            wait_for(lambda: any(json.loads(r.value)["tx_id"] == "on-time" for r in outputs(bootstrap)), 120,
                     "the on-time transaction, enriched from state")
            bad = Record(money.TRANSACTIONS_TOPIC, b"x", b'{"tx_id": "x", "amount": ', "bad")
            send(bootstrap, [tx("late", "s1", 10), bad, session("clock2", 2, 410)], progress=False)
            letters = wait_for(lambda: [json.loads(r.value) for r in read_topics(bootstrap,
                                                                                 [money.DEAD_LETTERS_TOPIC])],
                               40, "the timed-out lookup's dead letter, well before the service's 60 s")
            wait_for(lambda: len(read_topics(bootstrap, [money.DEAD_LETTERS_TOPIC])) == 2, 40, "both dead letters")
            assert query.isActive and query.exception() is None
        finally:
            query.stop()
    letters = {json.loads(r.value)["key"]: json.loads(r.value) for r in read_topics(bootstrap,
                                                                                   [money.DEAD_LETTERS_TOPIC])}
    assert letters["late"]["reason"].startswith("lookup timed out after 1.0 s")
    assert letters["late"]["source_topic"] == money.TRANSACTIONS_TOPIC
    assert json.loads(letters["late"]["value"])["session_id"] == "s1"
    assert letters["x"]["reason"] == "malformed JSON"
    assert "late" not in {json.loads(r.value)["tx_id"] for r in outputs(bootstrap)}


def test_a_users_snapshot_bootstraps_state_and_joinlab_state_prints_it(spark, bootstrap, tmp_path, monkeypatch,
                                                                        capsys):
    """MONEY_USERS_SNAPSHOT: users known before the stream has any user update (initial state of
    the user stage). `joinlab state` then prints sessions with their waiting transactions, and
    users, from the checkpoint through Spark's state data source."""
    setup_topics(bootstrap)
    snapshot = tmp_path / "users.jsonl"
    snapshot.write_bytes(b"\n".join(r.value for r in [user(1, 4, 0, name="Snap", segment="legacy"),
                                                      user(2, 9, 0, name="Shot")]))
    monkeypatch.setenv("MONEY_USERS_SNAPSHOT", str(snapshot))
    send(bootstrap, [session("s1", 1, 1), tx("a", "s1", 5), tx("waits", "not-yet", 30), session("clock", 2, 40)],
         progress=False)
    with LookupService(bootstrap, topic=money.SESSIONS_TOPIC, port=0) as service:
        use_service(monkeypatch, service)
        run_job_to_end(spark, money, bootstrap, tmp_path / "cp")
    got = {json.loads(r.value)["tx_id"]: json.loads(r.value) for r in outputs(bootstrap)}
    assert (got["a"]["user_name"], got["a"]["user_version"], got["a"]["user_segment"]) == ("Snap", 4, "legacy")

    assert cli.main(["state", "money-enrichment", "--checkpoint", str(tmp_path / "cp")]) == 0
    printed = capsys.readouterr().out
    for var in ("joining", "users", "txs"):
        assert f", {var} (" in printed, f"state variable {var} missing from:\n{printed}"
    assert "waits" in printed and "Snap" in printed and "Shot" in printed
    # as a user runs it: a fresh process, whose new session has run no query (and so had no state
    # store coordinator, which Spark's state reader asks for)
    alone = subprocess.run([sys.executable, "-m", "joinlab", "state", "money-enrichment", "--checkpoint",
                            str(tmp_path / "cp"), "--var", "users"], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "SPARK_MASTER": "local[1]", "LAB_SPARK_UI": "false"})
    assert alone.returncode == 0 and ", users (" in alone.stdout and "Snap" in alone.stdout, alone.stderr[-3000:]


def test_duplicates_are_dropped_on_a_sink_that_starts_empty(spark, tmp_path):
    """The original's dedup test asserted against a sink that was never cleared, so it proved
    nothing. Here the sink is a memory table that does not exist before the run, half of the
    transactions are sent twice, and every tx_id must appear exactly once."""
    records = generate(13, 1500, users=20, very_late=0.0, disorder=Disorder(duplicates=0.5))
    assert sum(r.kind == "duplicate" for r in records) == 750
    table = "money_dedup"
    assert not spark.catalog.tableExists(table)
    query = (money.build(read_records(spark, records, batches=3, partitions=2)).writeStream.format("memory")
             .queryName(table).option("checkpointLocation", str(tmp_path / "cp")).outputMode("append")
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
        assert query.exception() is None
        rows = spark.table(table).collect()
    finally:
        query.stop()
        spark.catalog.dropTempView(table)
    out = [SimpleNamespace(topic=r.topic, value=r.value.encode() if isinstance(r.value, str) else r.value)
           for r in rows if r.topic == money.ENRICHED_TOPIC]
    ids = [json.loads(r.value)["tx_id"] for r in out]
    want = reference.expected(records)
    assert len(ids) == len(set(ids)) == len(want) > 300
    assert reference.actual(out) == want


class UserEnrichWithTier(UserEnrich):
    """The user stage of a later release: the stored user gains a field at the end (a tier
    derived from the segment). Nothing else changes."""

    USER_SCHEMA = USER_SCHEMA + ", tier string"

    def _remember(self, row) -> None:
        self.users.updateValue((row.version,), (row.t_us, row.name, row.country, row.segment,
                                                row.segment.upper()))
        self._versions = None


def run_on_records(spark, records, batches, checkpoint) -> list:
    """The job on in-memory records (tests/spark_rows.py), collected batch by batch in order
    (foreachBatch resumes from a checkpoint; the memory sink does not); the rows this run wrote.
    foreachBatch's function runs on the Spark server: each batch goes to a folder of its own, read
    back here in batch order."""
    written = Path(checkpoint).parent / f"{Path(checkpoint).name}-batches"
    before = {folder.name for folder in written.glob("[0-9]*")}  # an earlier run's, on this checkpoint

    def keep(batch, batch_id):
        batch.select("topic", "value").write.mode("overwrite").json(f"{written}/{batch_id:06d}")

    with runner.configured(spark, money):
        query = (money.build(read_records(spark, records, batches=batches)).writeStream.foreachBatch(keep)
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        query.stop()
    ran = [folder for folder in sorted(written.glob("[0-9]*")) if folder.name not in before]
    return [SimpleNamespace(topic=r.topic, value=r.value.encode())
            for folder in ran for r in spark.read.schema("topic string, value string").json(str(folder)).collect()]


def test_a_field_added_to_the_stored_user_is_read_as_null_from_the_old_checkpoint(spark, tmp_path, monkeypatch):
    """State evolution without reprocessing: the first half runs with today's user stage; the
    restart on the same checkpoint runs a user stage whose stored user has one more field. With
    the job's Avro state encoding (SPARK_CONF) old entries read the new field as NULL and the
    output still equals the reference. Spark's default encoding refuses the same restart."""
    records = generate(14, 1200, users=20, very_late=0.0, disorder=Disorder(duplicates=0.05))
    half = records[:2 * -(-len(records) // 4)]  # two of the four micro-batches the whole list makes
    first = run_on_records(spark, half, 2, tmp_path / "cp")
    monkeypatch.setattr(money_query, "UserEnrich", UserEnrichWithTier)
    second = run_on_records(spark, records, 4, tmp_path / "cp")  # resumes after the first half
    assert reference.actual(first + second) == reference.expected(records)

    users = state.read(spark, str(tmp_path / "cp"), "users", state.operator_of(spark, str(tmp_path / "cp"), "users"))
    old, new = users[users["tier"].isna()], users[users["tier"].notna()]
    assert len(old) > 20 and len(new) > 5, "old versions keep NULL, versions stored after the restart have a tier"
    assert (new["tier"] == new["segment"].str.upper()).all()

    monkeypatch.setattr(money, "SPARK_CONF", {"spark.sql.streaming.stateStore.encodingFormat": "unsaferow"})
    monkeypatch.setattr(money_query, "UserEnrich", UserEnrich)
    run_on_records(spark, half, 2, tmp_path / "default")
    monkeypatch.setattr(money_query, "UserEnrich", UserEnrichWithTier)
    with pytest.raises(Exception, match="STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"):
        run_on_records(spark, records, 4, tmp_path / "default")
