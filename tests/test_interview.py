"""Interview mode: the stubs run and fail the grader readably, the solutions pass it, every common
wrong answer (tests/wrong_answers/) fails on the scenario the guide names, the stored expectations
are the reference's, and a packed workspace holds no solution and grades on its own."""
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from joinlab.interview import EXERCISES, ROOT, exercise, prompt_text
from joinlab.interview import scenarios as fast
from joinlab.interview.grade import check, lines

WRONG = ROOT / "tests" / "wrong_answers"
SOLUTIONS = {p: ROOT / "jobs" / exercise(p).module / "solution.py" for p in EXERCISES}
HIDDEN = ROOT / "exercises" / "hidden"

RESTARTED = fast.VARIANTS[fast.RESTART][0]
REORDERED = fast.VARIANTS[fast.REORDERED][0]
# What the grader says when Spark refuses to start a left outer stream-stream join it cannot bound.
REFUSED = ("your code raised AnalysisException: Stream-stream LeftOuter join between two streaming DataFrame/Datasets "
           "is not supported without a watermark in the join keys, or a watermark on the nullable side and an "
           "appropriate range condition; in Join LeftOuter, ")


def spark_marks(pattern: str) -> tuple:
    """A pattern whose candidate writes functions of Spark's own join runs its scenarios on a local
    Spark session (its InMemory): its cases start one, and are marked so."""
    return () if exercise(pattern).processors else (pytest.mark.spark,)


def on_spark(pattern: str):
    return pytest.param(pattern, marks=spark_marks(pattern))


# Each wrong answer of docs/interviewing.md, the scenario that exposes it (held back: "h/" before its
# name), the cause the grader gives in one line, and (where the variant has one) the edit that
# makes it right (its wrong text, the right one), so the scenario is seen to fail for that reason alone.
WRONG_ANSWERS = [
    ("tweet-views", "user_only", "tweet-before-its-author", "tweet 10: expected {", None),
    ("tweet-views", "user_only", "profile-update-re-emits-every-stored-tweet", "user_version=2 (got 1)", None),
    ("tweet-views", "last_arrival_wins", "stale-user-version-after-a-newer-one", "tweet 11: expected user_version=2 "
                                                                                 "(got 1)", None),
    ("tweet-views", "empty_author", "an-author-who-never-arrives", "tweet 20: expected nothing, got {", None),
    ("tweet-views", "row_by_row", "stale-user-version-after-a-newer-one", REORDERED, None),
    ("tweet-views", "state_on_self", "tweet-before-its-author", RESTARTED, None),
    ("car-pollution", "range_scan", "a-zone-update-reaches-every-car-in-the-zone", "car 3: expected reading_seq=1 "
                                                                                   "(got None)",
     ("RANGE_SCAN = True", "RANGE_SCAN = False")),
    ("car-pollution", "state_on_self_car_pollution", "a-reading-reaches-a-car-that-arrived-before-it", RESTARTED, None),
    ("lottery", "coupon_copy", "one-coupon-is-one-click", "entrants=1 (got 2)",
     ("STORE_THE_DECREMENT = False", "STORE_THE_DECREMENT = True")),
    ("lottery", "wall_clock_windows", "a-window-and-its-winner", "outcome winner 1 2026-01-01T00:00:00+00:00: "
                                                                 "expected {", None),
    ("lottery", "state_on_self_lottery", "a-window-and-its-winner", RESTARTED, None),
    ("money-enrichment", "no_waiting", "a-transaction-before-its-session", "got nothing (dead-lettered: session not "
                                                                           "found (HTTP 404))", None),
    ("money-enrichment", "no_waiting", "h/several-transactions-wait-for-one-session", "got nothing (dead-lettered: "
                                                                                      "session not found", None),
    ("money-enrichment", "no_waiting", "a-re-sent-transaction-with-other-fields", "dead letter t1: expected reason "
                                                                                  "'conflicting duplicate', got none",
     None),
    ("money-enrichment", "state_on_self_money_enrichment", "a-transaction-in-its-session", RESTARTED, None),
    ("ad-clicks", "ids_only_condition", "a-click-within-the-minute",
     REFUSED + "(click_impression_id = impression_id)", None),
    ("ad-clicks", "no_click_watermark", "a-click-before-its-impression",
     REFUSED + "((click_impression_id = impression_id) AND between(click_time, impression_time-T10000ms, ", None),
    ("ad-clicks", "no_impression_watermark", "an-impression-never-clicked",
     "impression 4: expected {impression_id=4, ad_id=7, placement='news/feed', "
     "impression_time='2026-01-01T00:00:00+00:00', click_id=None, click_time=None}, got nothing", None),
    ("ad-clicks", "narrow_window", "a-click-within-the-minute", "impression 2: expected {impression_id=2,",
     ("INTERVAL 10 SECONDS", "INTERVAL 1 MINUTE")),
    ("ad-clicks", "no_watermark_delay", "disorder-within-the-delay", "impression 11: expected click_id=1101 (got None)",
     ('DELAY = "0 seconds"', 'DELAY = "10 seconds"')),
    ("ad-clicks", "no_lower_bound", "h/a-click-stamped-before-its-impression", "impression 51: expected click_id=None "
                                                                              "(got 5101)",
     ("click_time <= impression_time", "click_time BETWEEN impression_time AND impression_time")),
]


def scenario_results(report) -> dict:
    return {s["name"]: s for s in report["fast"]["scenarios"]}


@pytest.mark.parametrize("pattern", [on_spark(p) for p in EXERCISES])
def test_the_untouched_stub_runs_and_fails_every_scenario_saying_what_was_expected(pattern):
    ex = exercise(pattern)
    report = check(pattern, ex.stub(), live="auto")
    assert not report["ok"] and report["live"] is None, "the live stage waits until every scenario passes"
    results = scenario_results(report)
    assert len(results) >= 6 and not any(s["ok"] for s in results.values())
    text = "\n".join(lines(report))
    first = next(iter(results.values()))
    assert first["details"][1].strip() == fast.load_dir(ex.scenarios())[0].says
    assert "input, in arrival order:" in first["details"][2] and "batch 1" in first["details"][3]
    if ex.processors:  # a stub processor runs, emits nothing, and the report says where to start
        assert not any(s["error"] for s in results.values()), "a stub must run, not raise"
        assert "processors emitted nothing in any scenario: start in " + ", ".join(ex.writes) in text
        assert any(re.search(r": expected .*, got nothing", d) for d in first["details"]), first["details"]
    else:  # Spark cannot start its own join without the functions: the stub raises, saying what to write
        hint = f"your code raised NotImplementedError: {ex.writes[-1]}: "
        assert all(s["cause"].startswith(hint) for s in results.values()), first["cause"]
        assert f"{ex.stub()}\", line" in first["error"], "the traceback is cut to the candidate's own frames"
    assert text.splitlines()[-1].startswith("RESULT: FAIL")


@pytest.mark.parametrize("pattern", [on_spark(p) for p in EXERCISES])
def test_the_lab_solution_passes_every_visible_and_held_back_scenario(pattern):
    report = check(pattern, SOLUTIONS[pattern], hidden_dir=HIDDEN, live="never")
    assert report["ok"], "\n".join(lines(report))
    held = [s for s in report["fast"]["scenarios"] if s["hidden"]]
    assert len(held) >= 3 and report["fast"]["failed"] == 0


@pytest.mark.parametrize("pattern", list(EXERCISES))
def test_every_stored_expectation_is_what_the_reference_says(pattern):
    ex = exercise(pattern)
    stored = fast.load_dir(ex.scenarios()) + fast.load_dir(ex.hidden())
    assert stored
    for scenario in stored:
        assert scenario.expect, f"{scenario.path}: an empty expectation checks nothing"
        assert scenario.expect == fast.expected_by_reference(pattern, scenario), (
            f"{scenario.path} is stale: run `joinlab interview scenarios {pattern} --refresh`")
        assert scenario.expect_dead == fast.dead_by_solution(pattern, scenario), (
            f"{scenario.path}: its dead letters are stale: run `joinlab interview scenarios {pattern} --refresh`")
    if pattern == "money-enrichment":  # its processors dead-letter conflicts: the scenarios say which
        assert any(s.expect_dead for s in stored)


@pytest.mark.parametrize("pattern,variant,scenario,cause,switch",
                         [pytest.param(*w, marks=spark_marks(w[0]), id=f"{w[1]}-{w[2]}") for w in WRONG_ANSWERS])
def test_a_common_wrong_answer_fails_on_the_scenario_the_guide_names_with_its_cause(pattern, variant, scenario, cause,
                                                                                     switch, tmp_path):
    hidden, scenario = scenario.startswith("h/"), scenario.removeprefix("h/")
    ex = exercise(pattern)
    # That scenario alone, held back or not as it is (a pattern of Spark's own join runs each on Spark).
    path = next(s.path for s in fast.load_dir(ex.hidden() if hidden else ex.scenarios()) if s.name == scenario)
    only, none = tmp_path / "only", tmp_path / "none"
    only.mkdir()
    none.mkdir()
    shutil.copy(path, only)
    dirs = {"scenario_dir": none, "hidden_dir": only} if hidden else {"scenario_dir": only}
    report = check(pattern, WRONG / f"{variant}.py", live="never", **dirs)
    named = scenario_results(report)[scenario]
    assert not named["ok"] and named["hidden"] == hidden, named["details"]
    assert bool(named["error"]) == cause.startswith("your code raised "), named["details"]
    assert cause in named["cause"], named["cause"]
    assert f"FAIL {scenario}" in named["details"][0] and f"FAIL {scenario}" in "\n".join(lines(report))
    if cause in (RESTARTED, REORDERED):  # only the variant fails it, and the details say so
        assert named["variants"][fast.AS_SENT] and f"  It {cause}." in named["details"]
    if switch:  # the same code with the mistake edited out passes that scenario
        wrong, right_text = switch
        text = (WRONG / f"{variant}.py").read_text()
        assert wrong in text
        right = tmp_path / f"{variant}_fixed.py"
        right.write_text(text.replace(wrong, right_text))
        assert scenario_results(check(pattern, right, live="never", **dirs))[scenario]["ok"]
    guide = (ROOT / "docs" / "interviewing.md").read_text()
    assert f"`{variant}.py`" in guide and scenario in guide, (
        f"docs/interviewing.md must pair {variant}.py with {scenario}")


def test_every_wrong_answer_is_paired_with_its_scenario():
    files = {p.stem for p in WRONG.glob("*.py") if not p.name.startswith("_")}
    assert files == {v for _, v, _, _, _ in WRONG_ANSWERS}


@pytest.mark.parametrize("pattern", [p for p in EXERCISES if exercise(p).processors])
def test_a_processor_that_keeps_its_state_on_itself_fails_fast_and_the_output_names_the_restart(pattern):
    """It passes every scenario in one process: only the restart between batches shows it. (A pattern
    whose candidate writes functions of Spark's own join has no processor, and no state of its own.)"""
    module = exercise(pattern).module
    wrong = WRONG / ("state_on_self.py" if pattern == "tweet-views" else f"state_on_self_{module}.py")
    done = subprocess.run([sys.executable, "-m", "joinlab", "interview", "check", pattern, "--fast", "--solution",
                           str(wrong)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f": {RESTARTED}" in done.stdout and "with a new processor object before each batch" in done.stdout
    report = check(pattern, wrong, hidden_dir=HIDDEN, live="never")
    assert all(s["variants"][fast.AS_SENT] for s in report["fast"]["scenarios"])
    assert report["fast"]["failed"] >= 3


def test_a_processor_that_raises_is_reported_with_its_own_line_not_a_crash(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text((ROOT / "exercises" / "tweet_views.py").read_text().replace(
        "        return iter(())", "        return iter([1 / 0])"))
    report = check("tweet-views", broken, live="never")
    first = report["fast"]["scenarios"][0]
    assert "ZeroDivisionError" in first["error"] and "broken.py" in first["error"]
    assert "your code raised:" in "\n".join(first["details"])


def test_a_file_without_the_processor_class_says_which_class_is_missing(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    report = check("car-pollution", empty, live="never")
    assert not report["ok"] and "defines no CarMovesProcessor and no ZoneCarsProcessor" in report["error"]


def test_check_prints_json_for_the_interviewer_and_exits_1_on_failure():
    done = subprocess.run([sys.executable, "-m", "joinlab", "interview", "check", "tweet-views", "--fast", "--json",
                           "--hidden", str(HIDDEN)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["fast"]["passed"] == 0 and report["fast"]["failed"] >= 10
    assert {s["hidden"] for s in report["fast"]["scenarios"]} == {True, False}


# --- The live stage: the candidate's processors in the real job -----------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("pattern", ["tweet-views", "car-pollution"])
def test_the_live_stage_runs_the_solution_in_the_real_job_restarts_it_and_verifies(spark, pattern):
    report = check(pattern, SOLUTIONS[pattern], live="always", count=800)  # on the `spark` fixture's session
    live = report["live"]
    assert report["ok"], "\n".join(lines(report))
    assert live["expected"] > 100 and live["mismatches"] == 0 and live["events"] >= 800
    assert live["batches_before_restart"] >= 2 and live["restarted_at_batch"] >= 2, "it must resume, not restart"


@pytest.mark.spark
def test_the_live_stage_catches_what_the_scenarios_let_through_and_tells_each_key_s_story(spark):
    """--live runs the job even when scenarios fail: a wrong answer's mismatches are counted there
    too, a few keys of each kind are told with their input by batch, and the cause the fast stage
    found (the restart) is named."""
    report = check("tweet-views", WRONG / "state_on_self.py", live="always", count=600)
    live = report["live"]
    assert not report["ok"] and live["mismatches"] > 0 and live["error"] is None
    text = "\n".join(lines(report))
    assert f"restarted from its checkpoint at batch {live['restarted_at_batch']}" in live["stories"][0]
    told = [line for line in live["stories"] if "; its input, in arrival order:" in line]
    assert 1 <= len(told) <= 9 and re.search(r"^ +batch \d+ .*tweets\[\d+\]@\d+ ", text, re.M), text
    assert "The fast stage's restart failed too (tweet-before-its-author" in text and RESTARTED in text


def test_the_live_stage_refuses_a_broker_whose_topics_already_hold_records(monkeypatch, bootstrap):
    from joinlab.kit import solutions
    from joinlab.generate import Record, send
    from joinlab.interview import live
    send(bootstrap, [Record("users", b"1", b"{}", "event")], progress=False)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", bootstrap)
    result = live.run("tweet-views", solutions.from_file(SOLUTIONS["tweet-views"]), count=50)
    assert not result.ok and "needs the pattern's topics empty" in result.error and "1 records on users" in result.error


# --- A candidate's workspace ----------------------------------------------------------------------

def significant_lines(path: Path) -> set[str]:
    """Lines that can carry logic: not imports, comments, blank or short ones."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return {text for text in lines if len(text) >= 16 and not text.startswith(("import ", "from ", "#"))}


def secret_lines() -> set[str]:
    """The solutions' and the references' lines that no given file (stub, wiring, lab) has too."""
    secret, given = set(), set()
    for ex in map(exercise, EXERCISES):
        secret |= significant_lines(ROOT / "jobs" / ex.module / "solution.py")
        secret |= significant_lines(ROOT / "references" / f"{ex.module}.py")
    for folder in ("exercises", "jobs", "joinlab", "generators"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "solution.py" and "bench" not in path.parts:
                given |= significant_lines(path)
    return secret - given


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    out = tmp_path_factory.mktemp("ws") / "tweet-views"
    done = subprocess.run([sys.executable, "-m", "joinlab", "interview", "pack", "tweet-views", "--out", str(out),
                           "--archive"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"2. edit   {out}/tweet_views.py" in done.stdout and "make -C" in done.stdout
    return out


def below_the_marker(page: Path) -> set[str]:
    """The significant lines of a pattern's page below its solution marker."""
    from joinlab.interview import MARKER
    lines = page.read_text().splitlines()
    return {text.strip() for text in lines[lines.index(MARKER) + 1:] if len(text.strip()) >= 16}


@pytest.mark.parametrize("pattern", list(EXERCISES))
def test_a_prompt_is_the_page_above_its_marker_and_holds_no_line_of_the_solution_below_it(pattern):
    ex = exercise(pattern)
    prompt = prompt_text(ex.prompt())
    assert ex.prompt().read_text().startswith(prompt.rstrip()) and "## Questions" in prompt
    assert "## State" not in prompt, "the solution's state layout belongs below the marker"
    words = " ".join(prompt.split())
    assert not ex.processors or "a new processor object" in words and "rows in another order" in words, (
        "the prompt says what the fast stage plays: a restart between batches, rows reordered")
    assert not below_the_marker(ex.prompt()) & {line.strip() for line in prompt.splitlines()}


def test_a_page_without_the_marker_gives_no_prompt(tmp_path):
    page = tmp_path / "README.md"
    page.write_text("# A pattern\n\nThe prompt and the solution, with nothing between them.\n")
    with pytest.raises(ValueError, match="exactly once"):
        prompt_text(page)


def test_the_packed_prompt_is_the_page_above_the_marker_and_no_page_in_the_workspace_holds_what_is_below(workspace):
    ex = exercise("tweet-views")
    assert (workspace / "tweet_views.md").read_text() == prompt_text(ex.prompt())
    solution = below_the_marker(ex.prompt())
    leaks = [(p.relative_to(workspace), line) for p in workspace.rglob("*.md")
             for line in solution & {text.strip() for text in p.read_text(errors="replace").splitlines()}]
    assert not leaks, f"text from below the marker in the workspace: {leaks[:5]}"
    assert not list((workspace / "lab" / "jobs").rglob("README.md")), "a pattern's page holds its solution"


def test_a_packed_workspace_holds_no_solution_and_no_reference(workspace):
    files = [p for p in workspace.rglob("*") if p.is_file()]
    assert {"tweet_views.md", "README.md", "Makefile", "tweet_views.py", "expectation.json",
            "interview-log.json"} <= {p.name for p in files}
    assert "new processor object before every micro-batch" in " ".join((workspace / "README.md").read_text().split())
    assert "packed" in json.loads((workspace / "interview-log.json").read_text())
    assert not [p for p in files if p.name == "solution.py" or "references" in p.parts or "bench" in p.parts]
    secrets = secret_lines()
    assert len(secrets) > 300, "the check must have something to look for"
    leaks = [(p.relative_to(workspace), line) for p in files if p.suffix in (".py", ".md", ".json", "")
             for line in secrets & {text.strip() for text in p.read_text(errors="replace").splitlines()}]
    assert not leaks, f"solution or reference code in the workspace: {leaks[:5]}"
    assert Path(f"{workspace}.tar.gz").stat().st_size > 10_000


def isolated_python(tmp_path: Path) -> Path:
    """A Python that sees this venv's packages but not the lab's own checkout: the workspace's
    copy of the lab is all it can import (no solutions, no references)."""
    env = tmp_path / "iso"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "lab-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env / "bin" / "python"


def grade_in_workspace(python: Path, workspace: Path, solution: str, *flags) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(workspace / "lab")}
    return subprocess.run([str(python), "-m", "joinlab", "interview", "check", "tweet-views", "--solution", solution,
                           "--scenarios", "scenarios", "--expectation", "expectation.json", *flags],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=600)


def test_the_workspace_grades_on_its_own_the_stub_fails_and_a_right_answer_passes_live(workspace, tmp_path):
    python = isolated_python(tmp_path)
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('references'), "
                                               "u.find_spec('jobs.tweet_views.solution'))"],
                           env={**os.environ, "PYTHONPATH": str(workspace / "lab")}, cwd=workspace, capture_output=True,
                           text=True)
    assert probe.stdout.split() == ["None", "None"], probe.stdout + probe.stderr
    stub = grade_in_workspace(python, workspace, "tweet_views.py", "--fast")
    assert stub.returncode == 1 and "FAIL tweet-before-its-author" in stub.stdout, stub.stdout + stub.stderr
    shutil.copy(SOLUTIONS["tweet-views"], workspace / "answer.py")  # as a candidate's right answer
    done = grade_in_workspace(python, workspace, "answer.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "6 of 6 passed" in done.stdout and re.search(r"tweet-views: (\d+) expected, \1 in output, 0 mismatches",
                                                        done.stdout), done.stdout
    checks = json.loads((workspace / "interview-log.json").read_text())["checks"]
    assert [(c["ok"], c["live"]) for c in checks] == [(False, None), (True, True)], "each check, timed, in the log"


def test_a_live_failure_tells_each_failed_key_s_story_its_input_by_batch_and_the_restart():
    """Pure: the progress of the two runs and the input topics as read back, no Spark."""
    from joinlab.interview.live import stories
    from joinlab.topics import Consumed
    from joinlab.verify import compare

    def progress(batch, start, end):
        return {"batchId": batch, "sources": [{"startOffset": start and json.dumps({"tweets": {"0": start}}),
                                               "endOffset": json.dumps({"tweets": {"0": end}, "users": {"0": 1}})}]}
    inputs = [Consumed("users", 0, 0, b"1", b'{"user_id":1,"version":1}', 1),
              Consumed("tweets", 0, 0, b"10", b'{"tweet_id":10,"user_id":1,"version":1}', 2),
              Consumed("tweets", 0, 1, b"11", b'{"tweet_id":11,"user_id":1,"version":1}', 3),
              Consumed("tweets", 0, 2, b"12", b'{"tweet_id":12,"user_id":2,"version":1}', 4)]
    expect = {"10": {"tweet_id": 10, "user_id": 1, "tweet_version": 1, "user_version": 1},
              "11": {"tweet_id": 11, "user_id": 1, "tweet_version": 1, "user_version": 1}}
    got = {"11": {"tweet_id": 11, "user_id": 1, "tweet_version": 1, "user_version": 0}}
    report = compare("tweet-views", expect, got, lambda v: (v["tweet_version"], v["user_version"]))
    text = stories(report, expect, got, inputs, [progress(0, None, 1), progress(1, 1, 2)], restarted_at=1)
    assert text[0] == "The job stopped and restarted from its checkpoint at batch 1."
    missing = text[text.index("missing 10; its input, in arrival order:"):text.index("stale 11; its input, in "
                                                                                     "arrival order:")]
    assert [line.split()[:2] for line in missing[1:3]] == [["batch", "0"], ["batch", "0"]]
    assert "users[0]@0" in missing[1] and "tweets[0]@0" in missing[2] and "tweet_id\":11" not in "".join(missing)
    assert missing[-2].startswith('  expected {"tweet_id": 10,') and missing[-2].endswith("}, got nothing")
    stale = text[text.index("stale 11; its input, in arrival order:"):]
    assert "batch 1 (after the restart)" in stale[2] and "tweets[0]@1" in stale[2]
    assert stale[-1] == "  expected user_version=1 (got 0)"


def test_the_interviewer_s_report_for_a_fail_and_a_pass_reads_back_with_causes_minutes_and_questions(tmp_path):
    from datetime import datetime, timedelta, timezone

    from joinlab.interview.report import LOG
    workspace = tmp_path / "ws"
    workspace.mkdir()
    packed = datetime.now(timezone.utc) - timedelta(minutes=30)
    at = lambda minutes: (packed + timedelta(minutes=minutes)).isoformat(timespec="seconds")  # noqa: E731
    (workspace / LOG).write_text(json.dumps({"packed": at(0), "checks": [
        {"at": at(4), "ok": False, "live": None, "held_back": False},
        {"at": at(21), "ok": True, "live": True, "held_back": False}]}))

    def graded(solution: Path, name: str, *flags) -> str:
        shutil.copy(solution, workspace / "tweet_views.py")
        done = subprocess.run([sys.executable, "-m", "joinlab", "interview", "check", "tweet-views", "--fast",
                               "--solution", str(workspace / "tweet_views.py"), "--report", str(tmp_path / name),
                               *flags], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == (0 if "pass" in name else 1), done.stdout + done.stderr
        return (tmp_path / name).read_text()

    failed = graded(WRONG / "state_on_self.py", "fail.md")
    assert "# Interview report: tweet-views" in failed and "**FAIL**" in failed
    assert "| scenario | as sent | after a restart | rows reordered | cause |" in failed
    assert f"| tweet-before-its-author | ok | **FAIL** | ok | {RESTARTED} |" in failed
    assert "| a-duplicate | ok | ok | ok |  |" in failed
    assert "Live stage: not run (every scenario must pass first" in failed
    assert "First check: 4 min after the pack." in failed and "First full pass (every scenario and the live stage): " \
                                                              "21 min after the pack." in failed
    questions = failed[failed.index("## Questions from the guide"):]
    assert "`state_on_self.py`" in questions and "**after a restart**" in questions
    assert "where does your state live between two micro-batches" in questions
    assert "Two users merge accounts" not in questions, "follow-ups are for a pass"

    passed = graded(SOLUTIONS["tweet-views"], "pass.md", "--hidden", str(HIDDEN))
    assert "**PASS**" in passed and "**FAIL**" not in passed
    assert "| update-and-new-tweets-in-one-batch (held back) | ok | ok | ok |  |" in passed
    assert "3 checks by the candidate" in passed, "the interviewer's run with --hidden is not the candidate's"
    assert "Two users merge accounts" in passed[passed.index("## Questions from the guide"):]
    checks = json.loads((workspace / LOG).read_text())["checks"]
    assert [(c["ok"], c["held_back"]) for c in checks[2:]] == [(False, False), (True, True)]
