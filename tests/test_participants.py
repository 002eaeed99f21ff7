"""A room: many participants on one broker and one Spark server, each's work kept apart by their name
($LAB_PARTICIPANT): their topics `NAME.<topic>`, their queries `NAME.<query>`, and checkpoints a
Spark server running as another Unix user can write and a participant can start afresh. Unset,
the lab is a lab of one, exactly as the rest of the suite runs it."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from joinlab import cli, patterns
from joinlab.config import participant, query_name, topic_prefix
from joinlab.generate import Record as Produced
from joinlab.runner import CheckpointError, fresh_checkpoint
from joinlab.topics import Consumed, addressed, list_topics, named, own, owned, read_topics
from tests.conftest import ROOT
from tests.test_notebooks import NOTEBOOKS_DIR, kernel  # noqa: F401 (a fixture)
from tests.test_notebooks import test_notebook_runs_top_to_bottom as run_notebook

PATTERN = "tweet-views"


# --- The name -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["alice", "team-7", "0", "b0b", "a" * 24, "x-"])
def test_a_participant_s_name_prefixes_topics_and_queries(name, monkeypatch):
    monkeypatch.setenv("LAB_PARTICIPANT", name)
    assert participant() == name and topic_prefix() == f"{name}."
    assert own("tweets") == f"{name}.tweets" and owned(["users", "tweets"]) == [f"{name}.users", f"{name}.tweets"]
    assert query_name("tweet_views") == f"{name}.tweet_views"


@pytest.mark.parametrize("unset", [True, False], ids=["unset", "empty"])
def test_no_participant_leaves_every_name_as_it_is(unset, monkeypatch):
    if unset:
        monkeypatch.delenv("LAB_PARTICIPANT", raising=False)
    else:
        monkeypatch.setenv("LAB_PARTICIPANT", "")
    assert participant() == "" and topic_prefix() == ""
    assert own("tweets") == "tweets" and query_name("tweet_views") == "tweet_views"


@pytest.mark.parametrize("name", ["Alice", "-alice", "al.ice", "al_ice", "al ice", "a" * 25, "alice\n", "élodie"])
def test_a_name_outside_the_rule_is_refused_with_the_rule(name, monkeypatch):
    monkeypatch.setenv("LAB_PARTICIPANT", name)
    for call in (participant, topic_prefix, lambda: own("tweets")):
        with pytest.raises(ValueError) as refused:
            call()
        message = str(refused.value)
        assert repr(name) in message and "a-z, 0-9 and '-'" in message
        assert "starting with a letter or digit" in message and "at most 24" in message


def test_a_command_with_a_bad_name_says_the_rule_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("LAB_PARTICIPANT", "Alice")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # never reached
    assert cli.main(["topics", "create", PATTERN]) == 2
    err = capsys.readouterr().err
    assert err.startswith("joinlab: LAB_PARTICIPANT='Alice' is not a participant's name") and "Traceback" not in err


def test_records_go_to_the_participant_s_topics_and_come_back_under_the_pattern_s_names(monkeypatch):
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    sent = list(addressed([Produced("tweets", b"1", b"{}", "event"), Produced("users", b"2", b"{}", "event")]))
    assert [r.topic for r in sent] == ["alice.tweets", "alice.users"]
    read = named([Consumed("alice.tweet-views", 0, 0, b"1", b"{}", 0),
                  Consumed("alice.notebook-tweet-views", 0, 1, None, None, 0)])
    assert [r.topic for r in read] == ["tweet-views", "notebook-tweet-views"]
    monkeypatch.delenv("LAB_PARTICIPANT")
    assert [r.topic for r in addressed(sent)] == ["alice.tweets", "alice.users"]  # as they are


def test_the_status_line_counts_a_participant_s_input_topics(monkeypatch):
    """The query's progress names its sources' topics as the broker does (`alice.tweets`); `joinlab
    run`'s status line and a notebook's progress table count them under the pattern's names."""
    from joinlab.status import batch_status
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    progress = {"batchId": 0, "durationMs": {"triggerExecution": 10},
                "sources": [{"startOffset": None, "endOffset": {"alice.users": {"0": 3}, "alice.tweets": {"0": 5}}}],
                "observedMetrics": {}}
    status = batch_status(progress, ["users", "tweets"], ["tweet-views", "tweet-views-dlq"], "tweet-views-dlq")
    assert status.records_in == {"users": 3, "tweets": 5}


def test_the_background_generator_is_the_participant_s(monkeypatch, tmp_path):
    """`joinlab lab generate` starts the generator with the participant's environment: it writes their topics."""
    from joinlab.stack import procs, services
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    started = {}
    monkeypatch.setattr(procs, "spawn", lambda name, cmd, marker, env, **kw: started.update(name=name, env=env))
    services.start_generator(PATTERN, "127.0.0.1:1", 50.0, 100, None, [])
    assert started["env"]["LAB_PARTICIPANT"] == "alice" and started["env"]["LAB_HOME"] == str(tmp_path)


def test_a_notebook_s_lab_names_the_participant_s_topics_query_and_outputs(monkeypatch):
    from joinlab.notebook import Lab
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # named, never reached
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    lab = Lab(PATTERN)
    assert lab.query_name == "alice.notebook_tweet_views"
    assert lab.names == {"users": "alice.users", "tweets": "alice.tweets", "tweet-views": "alice.notebook-tweet-views",
                         "tweet-views-dlq": "alice.notebook-tweet-views-dlq"}
    assert lab.outputs == {"tweet-views": "alice.notebook-tweet-views",
                           "tweet-views-dlq": "alice.notebook-tweet-views-dlq"}
    assert lab._named([Consumed("alice.notebook-tweet-views", 0, 0, None, None, 0),
                       Consumed("alice.tweets", 0, 0, None, None, 0)])[0].topic == "tweet-views"
    monkeypatch.delenv("LAB_PARTICIPANT")
    alone = Lab(PATTERN)
    assert alone.query_name == "notebook_tweet_views" and alone.names["tweets"] == "tweets"
    assert alone.outputs == {"tweet-views": "notebook-tweet-views", "tweet-views-dlq": "notebook-tweet-views-dlq"}


# --- Checkpoints ------------------------------------------------------------------------------------

def _checkpoint_with_files(folder: Path) -> Path:
    """A checkpoint as the server leaves one: files, and a folder only its owner may change."""
    path = folder / "tweet-views"
    (path / "offsets").mkdir(parents=True)
    (path / "offsets" / "0").write_text("v1\n")
    (path / "state" / "0").mkdir(parents=True)
    (path / "state" / "0" / "1.delta").write_bytes(b"x")
    (path / "state" / "0").chmod(0o555)
    return path


def test_a_fresh_checkpoint_renames_the_old_one_aside_in_its_folder_then_removes_what_it_may(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_PARTICIPANT", raising=False)
    path = _checkpoint_with_files(tmp_path)
    removed = []
    monkeypatch.setattr(shutil, "rmtree", lambda p, ignore_errors=False: removed.append((p, ignore_errors)))
    fresh_checkpoint(str(path))
    monkeypatch.undo()
    (aside,) = tmp_path.glob(".tweet-views.old-*")
    assert removed == [(str(aside), True)] and (aside / "offsets" / "0").read_text() == "v1\n"
    assert re.fullmatch(r"\.tweet-views\.old-\d{8}T\d{6}\.\d{6}Z", aside.name)
    assert not path.exists()  # no participant: Spark makes it, as before
    (aside / "state" / "0").chmod(0o755)


def test_a_fresh_checkpoint_leaves_nothing_of_the_old_one_it_may_delete(tmp_path, monkeypatch):
    monkeypatch.delenv("LAB_PARTICIPANT", raising=False)
    path = _checkpoint_with_files(tmp_path)
    if os.geteuid() != 0:  # only root deletes in a folder it may not write in
        (path / "state" / "0").chmod(0o755)
    fresh_checkpoint(str(path))
    assert list(tmp_path.iterdir()) == []
    fresh_checkpoint(str(path))  # none there: nothing to do
    assert list(tmp_path.iterdir()) == []


def test_a_participant_s_fresh_checkpoint_is_a_folder_the_server_s_user_may_write_in(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    umask = os.umask(0o022)
    try:
        for path in (tmp_path / "checkpoints" / "tweet-views", _checkpoint_with_files(tmp_path / "again")):
            fresh_checkpoint(str(path))
            assert path.is_dir() and list(path.iterdir()) == []
            assert stat.S_IMODE(path.stat().st_mode) == 0o777
    finally:
        os.umask(umask)


def test_run_reset_and_a_notebook_s_start_job_start_their_checkpoint_afresh_through_the_one_helper(
        tmp_path, monkeypatch, capsys):
    """`joinlab run --reset` stops with the helper's message, in one line, when it cannot start the
    checkpoint afresh; a notebook's `start_job` raises it to the cell."""
    import joinlab.runner
    import joinlab.topics
    from joinlab.notebook import Lab
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1")  # named, never reached
    monkeypatch.setattr(joinlab.topics, "create_topics", lambda bootstrap, names: None)

    def refuse(path):
        raise CheckpointError(f"cannot start the checkpoint {path} afresh; see `joinlab run PATTERN --checkpoint DIR`")
    monkeypatch.setattr(joinlab.runner, "fresh_checkpoint", refuse)
    checkpoint = tmp_path / "cp"
    assert cli.main(["run", PATTERN, "--reset", "--checkpoint", str(checkpoint)]) == 2
    err = capsys.readouterr().err
    assert err == (f"joinlab run {PATTERN}: cannot start the checkpoint {checkpoint} afresh; "
                   f"see `joinlab run {PATTERN} --checkpoint DIR`\n")
    lab = Lab(PATTERN)
    lab.spark = SimpleNamespace(streams=SimpleNamespace(active=[]))  # a session running no query
    with pytest.raises(CheckpointError, match=f"cannot start the checkpoint {lab.checkpoint} afresh"):
        lab.start_job()


def test_a_rename_that_fails_is_an_error_that_says_what_happened_and_what_to_do(monkeypatch):
    """The participant may not write in the checkpoint's folder: the old checkpoint stays, and a job
    started on it would resume from it, so the call fails with why and what to do. As root (who may
    rename anything), the call runs in a forked child as the unprivileged user 65534."""
    monkeypatch.delenv("LAB_PARTICIPANT", raising=False)
    top = Path(tempfile.mkdtemp(prefix="joinlab-read-only-"))  # in /tmp: a path user 65534 may pass through
    try:
        top.chmod(0o755)
        folder = top / "checkpoints"
        path = _checkpoint_with_files(folder)
        folder.chmod(0o555)
        message = _fresh_checkpoint_as_another_user(str(path)) if os.geteuid() == 0 else _fresh_checkpoint(str(path))
        assert message is not None, "no error: the old checkpoint would be resumed without a word"
        assert f"cannot start the checkpoint {path} afresh: renaming it aside to {folder}/.tweet-views.old-" in message
        assert "still there and a job started on it would resume from it" in message
        assert f"Make its folder {folder} writable for you, or choose another checkpoint" in message
        assert (path / "offsets" / "0").read_text() == "v1\n" and not list(folder.glob(".tweet-views.old-*"))
    finally:
        for folder in (top / "checkpoints", top / "checkpoints" / "tweet-views" / "state" / "0"):
            folder.chmod(0o755)
        shutil.rmtree(top)


def _fresh_checkpoint(path: str) -> str | None:
    try:
        fresh_checkpoint(path)
    except CheckpointError as exc:
        return str(exc)
    return None


def _fresh_checkpoint_as_another_user(path: str, uid: int = 65534) -> str | None:
    """fresh_checkpoint(path) in a forked child running as `uid`: its error message, or None."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: everything it calls is imported already
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            message = _fresh_checkpoint(path)
            os.write(write, json.dumps(message).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child failed before it called fresh_checkpoint"
    return json.loads(said)


# --- Two participants on one broker and one Spark server -------------------------------------------

def joinlab(home: Path, name: str, bootstrap: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAB_HOME": str(home / name), "LAB_PARTICIPANT": name}
    done = subprocess.run([sys.executable, "-m", "joinlab", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{name}: joinlab {' '.join(args)}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _texts(records) -> set[str]:
    """The tweets' texts of tweet records or of views (tweet-views' records)."""
    bodies = [json.loads(r.value) for r in records]
    return {body["tweet"]["text"] if "tweet" in body else body["text"] for body in bodies}


@pytest.mark.spark
def test_two_participants_run_the_same_commands_on_one_broker_and_never_see_each_other_s_records(
        spark, bootstrap, tmp_path):
    count = {"alice": 300, "bob": 200}
    for seed, name in enumerate(count, start=1):
        made = joinlab(tmp_path, name, bootstrap, "generate", PATTERN, "--count", str(count[name]), "--seed", str(seed),
                       "--no-progress")
        assert f"to {name}.users, {name}.tweets at {bootstrap}" in made.stdout
        run = joinlab(tmp_path, name, bootstrap, "run", PATTERN, "--available-now", "--json")
        batches = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        inputs = [f"{name}.{topic}" for topic in patterns.job(PATTERN).INPUT_TOPICS]
        assert sum(sum(b["records_in"].values()) for b in batches) == len(read_topics(bootstrap, inputs))
        checkpoint = tmp_path / name / "checkpoints" / PATTERN
        assert f"checkpoint {checkpoint}" in run.stderr and stat.S_IMODE(checkpoint.stat().st_mode) == 0o777
        verified = joinlab(tmp_path, name, bootstrap, "verify", PATTERN).stdout
        found = re.search(r"(\d+) expected, (\d+) in output, 0 mismatches \(OK\)", verified)
        assert found and int(found[1]) == int(found[2]) > 0, verified

    every = {t.topic for t in list_topics(bootstrap)}
    assert every == {f"{name}.{topic}" for name in count for topic in patterns.all_topics(PATTERN)}
    listed = joinlab(tmp_path, "alice", bootstrap, "topics", "list").stdout.splitlines()[1:]
    assert {line.split()[0] for line in listed} == {t for t in every if t.startswith("alice.")}
    assert len(joinlab(tmp_path, "alice", bootstrap, "topics", "list", "--all").stdout.splitlines()[1:]) == len(every)
    tail = joinlab(tmp_path, "bob", bootstrap, "topics", "tail", "tweet-views", "-n", "1").stdout
    assert tail.startswith("bob.tweet-views  partition ")

    views = {name: read_topics(bootstrap, [f"{name}.tweet-views"]) for name in count}
    tweets = {name: _texts(read_topics(bootstrap, [f"{name}.tweets"])) for name in count}
    for name, other in (("alice", "bob"), ("bob", "alice")):
        assert views[name] and _texts(views[name]) <= tweets[name]
        assert not _texts(views[name]) & tweets[other], f"{name}'s views hold {other}'s tweets"


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_a_participant_s_notebook_runs_top_to_bottom_on_their_own_topics(
        tmp_path, kernel, bootstrap, spark, monkeypatch):  # noqa: F811 (kernel: the fixture imported above)
    """The tweet-views notebook as it runs in the room (tests/test_notebooks.py's machinery, with
    LAB_PARTICIPANT): green, and every topic it made is alice's; its checkpoint the server may write."""
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    run_notebook(NOTEBOOKS_DIR / "tweet_views.ipynb", tmp_path, kernel, bootstrap, spark)
    made = {t.topic for t in list_topics(bootstrap)}
    assert made == {"alice.users", "alice.tweets", "alice.notebook-tweet-views", "alice.notebook-tweet-views-dlq"}
    checkpoint = tmp_path / "home" / "notebooks" / "tweet_views" / "checkpoint"
    assert stat.S_IMODE(checkpoint.stat().st_mode) == 0o777 and (checkpoint / "commits").is_dir()


@pytest.mark.spark
def test_a_participant_s_interview_live_stage_grades_on_their_own_topics_of_the_room_s_broker(
        spark, bootstrap, monkeypatch):
    """`joinlab interview check` in a room: the broker is the room's ($KAFKA_BOOTSTRAP_SERVERS), whose
    other participants' topics hold records; the live stage needs only the participant's own empty."""
    from joinlab.kit import solutions
    from joinlab.generate import send
    from joinlab.interview import live
    send(bootstrap, [Produced("bob.users", b"1", b"{}", "event")], progress=False)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    monkeypatch.setenv("LAB_PARTICIPANT", "alice")
    result = live.run(PATTERN, solutions.from_file(ROOT / "jobs" / "tweet_views" / "solution.py"), count=600)
    assert result.ok and result.expected > 50 and result.restarted_at_batch, result
    made = {t.topic for t in list_topics(bootstrap)} - {"bob.users"}
    assert made == set(owned(patterns.all_topics(PATTERN)))
