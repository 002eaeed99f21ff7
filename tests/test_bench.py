"""The benchmark's arithmetic: pure logic over progress reports shaped as Spark writes them."""
import json

from joinlab.bench.batches import stats_of


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


def test_the_cold_start_table_gives_each_variant_its_medians_and_off_over_on():
    from joinlab.bench.cold_start import format_cold_start
    on = [{"session_s": 3.0, "start_s": 3.0, "batches_s": 12.0, "process_s": 20.0},
          {"session_s": 3.4, "start_s": 3.6, "batches_s": 13.0, "process_s": 22.0}]
    off = [{"session_s": 6.4, "start_s": 4.0, "batches_s": 13.0, "process_s": 26.0},
           {"session_s": 6.0, "start_s": 5.0, "batches_s": 12.0, "process_s": 25.0}]
    lines = format_cold_start({"class archive on": on, "class archive off": off}).splitlines()
    assert "median of 2 runs each" in lines[0]
    assert lines[2].split() == ["class", "archive", "on", "3.2", "3.3", "12.5", "21.0"]
    assert lines[3].split() == ["class", "archive", "off", "6.2", "4.5", "12.5", "25.5"]
    assert lines[4].split() == ["off", "/", "on", "1.94x", "1.36x", "1.00x", "1.21x"]


def test_the_ceiling_table_puts_each_pattern_beside_its_job_with_processors_that_do_nothing_and_its_target():
    from joinlab.bench.batches import BatchStats
    from joinlab.bench.micro import format_ceiling
    lab = {"tweet-views": [BatchStats("tv", 2000, [650, 700, 600], [100] * 3), BatchStats("tv", 5000, [4000], [16000])],
           "lottery": [BatchStats("l", 3000, [1100], [100]), None]}
    nothing = {"tweet-views": [BatchStats("n", 1900, [500], [100]), BatchStats("n", 4000, [2000], [14000])],
               "lottery": [BatchStats("n", 2500, [900], [100]), None]}
    lines = format_ceiling({"patterns": lab, "ceiling": nothing}).splitlines()
    assert lines[2].split() == ["tweet-views", "650", "500", "700", "4,000", "7,000", "10,000"]
    assert lines[3].split() == ["lottery", "1,100", "900", "700", "-", "-", "5,000"]


def test_processors_that_do_nothing_stand_in_for_every_pattern_s_read_their_rows_and_keep_and_emit_nothing():
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester
    from joinlab import patterns, solutions
    from joinlab.bench.ceiling import Nothing, solution
    for pattern in patterns.PATTERNS:
        job = patterns.job(pattern)
        module = solutions.of(job.SOLUTION, job.PROCESSORS, solution(job))
        assert all(getattr(module, name) is Nothing for name in job.PROCESSORS)
    read = []

    def rows():
        for i in range(3):
            read.append(i)
            yield Row(kind="tweet", user_id=1, version=i)
    processor = Nothing("a stage's settings", retention=1)
    assert list(processor.handleInputRows((1,), rows(), None)) == [] and read == [0, 1, 2]
    assert TwsTester(Nothing()).test(1, [Row(user_id=1, version=1)]) == []


def test_the_stage_alone_table_puts_each_pattern_s_whole_job_beside_its_stage_alone():
    from joinlab.bench.batches import BatchStats
    from joinlab.bench.micro import format_alone
    lab = {"tweet-views": [None, BatchStats("tv", 5000, [4000], [16000])], "lottery": [None, None]}
    alone = {"tweet-views": BatchStats("a", 4000, [2000], [10000]), "lottery": BatchStats("a", 3000, [1000], [5000])}
    lines = format_alone({"patterns": lab, "alone": alone}).splitlines()
    assert lines[2].split() == ["tweet-views", "4,000", "5,000", "80%"]
    assert lines[3].split() == ["lottery", "-", "5,000", "-"]
