"""The studies in perf/ still run: the cheap ones on a few events (the Spark ones, perf.ablation and
perf.stages, are run by hand: perf/README.md), and the tables they print add up."""
import os
import signal

from perf.bench.batches import BatchStats


def test_plain_python_joins_the_same_events_into_the_same_views_through_twstester_and_dicts(capsys):
    from perf import plain_python
    assert plain_python.main(["--events", "300"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("events/s" in line for line in lines)
    views = [line.split("(")[1] for line in lines]  # "(N views, M tweets)"
    assert views[0] == views[1] and not views[0].startswith("0 views"), lines


def test_the_lookup_rate_looks_each_session_up_once_over_http(bootstrap):
    from perf.lookup_rate import measure
    lookups, seconds, concurrency = measure(bootstrap, seed=5, events=1000, lookups=50)
    assert lookups == 50 and seconds > 0 and concurrency >= 1


def test_the_stage_alone_table_puts_each_pattern_s_whole_job_beside_its_stage_alone():
    from perf.stages import format_alone
    alone = {"tweet-views": (BatchStats("w", 5000, [4000], [16000]), BatchStats("a", 4000, [2000], [10000])),
             "lottery": (BatchStats("w", 3000, [1000], [0]), BatchStats("a", 3000, [1000], [5000]))}
    lines = format_alone(alone).splitlines()
    assert lines[2].split() == ["tweet-views", "4,000", "5,000", "80%"]
    assert lines[3].split() == ["lottery", "0", "5,000", "-"]


def test_the_ablation_table_gives_each_variant_against_all_settings_on():
    from perf.ablation import VARIANTS, format_ablation
    on, per_event = VARIANTS[0], VARIANTS[1]
    rows = [[on, BatchStats("on", 2000, [500], [100]), BatchStats("on", 5000, [4000], [16000])],
            [per_event, BatchStats("off", 2000, [600], [100]), None]]
    lines = format_ablation(rows).splitlines()
    assert lines[2].split()[-4:] == ["500", "1.00x", "4,000", "1.00x"]
    assert lines[3].split()[-4:] == ["600", "1.20x", "-", "-"]


def test_a_user_run_s_figures_come_from_its_status_lines():
    from perf.user_runs import summary

    def status(records, seconds):
        return {"records_in": {"users": records // 10, "tweets": records - records // 10}, "duration_s": seconds}
    lines = [(12.5, status(20_000, 9.0)), (17.0, status(20_000, 4.0)), (22.0, status(20_000, 6.0)),
             (23.0, status(100, 0.5))]
    figures = summary(lines)
    assert figures["first_line_s"] == 12.5 and figures["first_batch_s"] == 9.0
    assert figures["steady_rate"] == 4_000  # 40,000 records in 10 s: the first batch and the small one left out
    assert figures["median_batch_ms"] == 4_000 and figures["batches"] == 4
    assert summary([]) == {"first_line_s": None}


def test_the_changed_only_study_processor_keeps_the_same_last_views_as_the_lab_s():
    """perf/tweet_views_changed_only.py (writes only what changed, against the lab's one value per
    author) is only worth measuring while it joins the same: the same last view per tweet."""
    from pathlib import Path

    from generators.tweet_views import generate
    from jobs.tweet_views.in_memory import InMemory
    from joinlab.kit import solutions
    study = solutions.from_file(str(Path(__file__).parents[1] / "perf" / "tweet_views_changed_only.py"))
    records = generate(11, 600, users=40)
    last = []
    for pipeline in (InMemory(), InMemory(study)):
        rows = pipeline.rows(records)
        last.append(pipeline.views(pipeline.run([rows[i:i + 50] for i in range(0, len(rows), 50)])))
    assert last[0] == last[1] and len(last[0]) > 100


def test_the_plans_study_writes_each_pattern_s_plan_without_run_specific_ids(spark, tmp_path):
    import re

    from joinlab import patterns
    from perf import plans
    assert plans.main([str(tmp_path)]) == 0
    for pattern in patterns.PATTERNS:
        plan = (tmp_path / f"{pattern}.plan").read_text()
        assert "TransformWithState" in plan or "Join" in plan, pattern
        assert not re.search(r"#\d|[0-9a-f]{8}-[0-9a-f]{4}-", plan), "ids that differ from run to run"


def test_the_archive_study_sums_each_kind_of_pause_once_from_a_gc_log():
    from perf.archive_local import gc_summary
    log = """[7.037s][info][gc,start       ] GC(14) Pause Full (Metadata GC Threshold)
[7.124s][info][gc             ] GC(14) Pause Full (Metadata GC Threshold) 69M->57M(138M) 87.719ms
[7.200s][info][gc             ] GC(15) Pause Young (Allocation Failure) 80M->60M(138M) 10.500ms
[7.300s][info][gc             ] GC(16) Pause Young (Allocation Failure) 81M->61M(138M) 9.500ms
[7.301s][info][gc,metaspace   ] GC(16) Metaspace: 58291K(60096K)->58291K(60096K)"""
    assert gc_summary(log) == {"Pause Full (Metadata GC Threshold)": (1, 87.719),
                               "Pause Young (Allocation Failure)": (2, 20.0)}


SHARER = """
import ctypes, os, signal
libc = ctypes.CDLL(None)
libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
stack = ctypes.create_string_buffer(1 << 16)
# a child in the parent's address space (CLONE_VM), as a JVM's posix_spawn has one until its exec
shared = libc.clone(ctypes.cast(libc.pause, ctypes.c_void_p), ctypes.addressof(stack) + (1 << 16),
                    0x100 | signal.SIGCHLD, None)
forked = os.fork()
if forked == 0:
    signal.pause()
print(shared, forked, flush=True)
signal.pause()
"""


def test_the_memory_study_counts_a_child_in_its_parent_s_address_space_once_and_a_forked_child_apart(tmp_path):
    import subprocess
    import sys

    from perf.memory import processes
    parent = subprocess.Popen([sys.executable, "-c", SHARER], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        shared, forked = map(int, parent.stdout.readline().split())
        counted = {pid for _, pid, _, _, _ in processes(tmp_path, {"sharer": parent.pid})}
        assert counted == {parent.pid, forked}, (counted, shared)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
