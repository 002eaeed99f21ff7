"""The benchmark's arithmetic: pure logic over progress reports and views shaped as Spark and Kafka give them."""
import json
import re
from pathlib import Path
from types import SimpleNamespace

from perf.bench.batches import stats_of


def _progress(batch: int, start: dict | None, end: dict, ms: int) -> dict:
    read = sum(o - (start or {}).get(t, {}).get(p, 0) for t, parts in end.items() for p, o in parts.items())
    return {"batchId": batch, "numInputRows": 2 * read,  # a source scanned twice (events, dead letters)
            "durationMs": {"triggerExecution": ms, "addBatch": ms - 100},
            "sources": [{"startOffset": json.dumps(start) if start else None,
                         "endOffset": json.dumps(end)}]}


def test_the_steady_rate_counts_the_records_read_not_spark_s_rows_per_scan():
    progress = [_progress(0, None, {"users": {"0": 50}, "tweets": {"0": 50}}, 5000),  # start-up, apart
                _progress(1, {"users": {"0": 50}, "tweets": {"0": 50}}, {"users": {"0": 550}, "tweets": {"0": 1050}}, 1000),
                {"batchId": 2, "numInputRows": 0, "durationMs": {"triggerExecution": 3}, "sources": []},  # idle
                _progress(3, {"users": {"0": 550}, "tweets": {"0": 1050}}, {"users": {"0": 1050}, "tweets": {"0": 2050}}, 500)]
    stats = stats_of("job", progress, wall_s=7.0)
    assert stats.first_ms == 5000
    assert stats.rows == [1500, 1500]
    assert stats.rate == 3000 / 1.5
    assert stats.median_ms == 750


def test_the_ceiling_table_puts_each_pattern_beside_its_job_with_processors_that_do_nothing_and_its_target():
    from perf.bench.batches import BatchStats
    from perf.bench.table import format_ceiling, format_patterns
    lab = {"tweet-views": [BatchStats("tv", 2000, [650, 700, 600], [100] * 3), BatchStats("tv", 5000, [4000], [16000])],
           "lottery": [BatchStats("l", 3000, [1100], [100]), None],
           "ad-clicks": [BatchStats("a", 1000, [400], [100]), None]}  # Spark's own join: no processors, no ceiling run
    nothing = {"tweet-views": [BatchStats("n", 1900, [500], [100]), BatchStats("n", 4000, [2000], [14000])],
               "lottery": [BatchStats("n", 2500, [900], [100]), None]}
    lines = format_ceiling(lab, nothing).splitlines()
    assert lines[2].split() == ["tweet-views", "650", "500", "700", "4,000", "7,000", "10,000"]
    assert lines[3].split() == ["lottery", "1,100", "900", "700", "-", "-", "5,000"]
    assert lines[4].split() == ["ad-clicks", "400", "-", "700", "-", "-", "10,000"]
    lines = format_patterns(lab).splitlines()
    assert lines[2].split() == ["tweet-views", "650", "2,000", "4,000", "4,000", "5,000"]
    assert lines[3].split() == ["lottery", "1,100", "3,000", "-", "-", "-"]


def test_processors_that_do_nothing_stand_in_for_every_pattern_s_read_their_rows_and_keep_and_emit_nothing():
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester
    from joinlab import patterns
    from joinlab.kit import solutions
    from perf.bench.ceiling import Nothing, solution
    for pattern in patterns.PATTERNS:
        job = patterns.job(pattern)
        if not job.STAGES:  # no processors to stand in for: the bench runs no ceiling for it
            continue
        module = solutions.of(job.SOLUTION, job.PROCESSORS, solution(job))
        assert all(getattr(module, name) is Nothing for name in job.PROCESSORS)
    read = []

    def rows():
        for i in range(3):
            read.append(i)
            yield Row(side="tweet", user_id=1, version=i)
    processor = Nothing("a stage's settings", retention=1)
    assert list(processor.handleInputRows((1,), rows(), None)) == [] and read == [0, 1, 2]
    assert TwsTester(Nothing()).test(1, [Row(user_id=1, version=1)]) == []


def _view(tweet_id: int, version: int, timestamp: int):
    return SimpleNamespace(value=json.dumps({"tweet_id": tweet_id, "tweet": {"version": version}}), timestamp=timestamp)


def test_a_tweet_s_latency_runs_to_its_first_view_of_that_version_or_a_newer_one():
    from perf.bench.latency import Latency, _ViewMatcher
    matcher = _ViewMatcher({(1, 1): 1000, (1, 2): 1010, (2, 1): 1020})
    views = [_view(1, 2, 1500), _view(9, 1, 1510)]  # tweet 1's edit came in the batch of its first version
    assert not matcher.add(views)
    views += [_view(2, 1, 1700), _view(1, 3, 1800)]
    assert matcher.add(views)
    latencies, by_newer = matcher.latencies()
    assert latencies == [490, 500, 680] and by_newer == 1
    latency = Latency(3, 1.0, latencies, by_newer, None)
    assert (latency.percentile(50), latency.percentile(99)) == (500, 680)


def test_the_bench_in_the_package_reaches_jobs_and_generators_through_the_pattern_registry():
    """joinlab.patterns is the one way in: a pattern renamed or moved breaks nothing here."""
    bench = Path(__file__).parent.parent / "joinlab" / "bench"
    static = [f"{path.name}: {line.strip()}" for path in bench.glob("*.py") for line in path.read_text().splitlines()
              if re.match(r"\s*(from|import)\s+(jobs|generators|references)\b", line)]
    assert not static, static
