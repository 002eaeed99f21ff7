"""Each pattern's query, as Spark analyses it, is what the rest of the lab assumes of it: its
stateful calls are the STAGES the in-memory chain runs (so the unit tests and the grader test the
query's own stages), and it reads and writes Kafka in the pattern's own file."""
import ast
import re
from pathlib import Path

import pytest

from joinlab import patterns
from joinlab.kit.kafka import Kafka, read

ROOT = Path(__file__).resolve().parents[1]
# A stateful call in the analysed plan: its grouping columns' count, its output columns, its time mode.
STATEFUL = re.compile(r"TransformWithStateInPySpark transformWithStateUDF\((.*?)\)#\d+, (\d+), \[(.*?)\], Append, (\w+),")


def stateful_calls(spark, job) -> list[dict]:
    """The query's transformWithState calls, in query order: key, output columns, time mode, and
    whether the next call reads their emitted_at as its event time."""
    from perf.plans import analysed
    lines = analysed(job.build(read(spark, Kafka("127.0.0.1:9"), job.INPUT_TOPICS))).splitlines()
    calls = []
    for number, line in enumerate(lines):
        if found := STATEFUL.search(line):
            inputs, keys, output, mode = found.groups()
            child = re.search(r"Project \[(.*?)\]", lines[number + 1])  # the grouping columns, then the input
            names = [name.split("#")[0] for name in child.group(1).split(", ")]
            shown = [n.split("#")[0] for n in output.split(", ")]
            if more := re.fullmatch(r"\.\.\. (\d+) more fields", shown[-1]):  # Spark prints 25 at most
                shown = shown[:-1] + ["?"] * int(more.group(1))
            calls.append({"key": tuple(names[:int(keys)]), "output": shown,
                          "event_time": mode == "EventTime", "input": inputs})
    calls.reverse()  # the plan prints the last call first
    for call, after in zip(calls, calls[1:] + [None]):
        call["emits_time"] = after is not None and re.search(r"\bemitted_at#\d+-T", after["input"]) is not None
    return calls


@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_the_stages_the_in_memory_chain_runs_are_the_query_s_own_stateful_calls(spark, pattern):
    job = patterns.job(pattern)
    declared = [{"key": tuple(s.key), "output": [f.split(" ")[0] for f in s.output.split(", ")],
                 "event_time": s.event_time, "emits_time": s.emits_time} for s in job.STAGES]
    for call, stage in zip(in_plan := stateful_calls(spark, job), declared):  # the fields Spark left unprinted
        call["output"] = [name if name != "?" else stage["output"][i] for i, name in enumerate(call["output"])]
    in_plan = [{name: call[name] for name in ("key", "output", "event_time", "emits_time")} for call in in_plan]
    assert in_plan == declared, f"{pattern}: the query's transformWithState calls are not its STAGES"


@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_the_pattern_s_own_file_reads_kafka_and_writes_kafka(pattern):
    """readStream and writeStream in jobs/<pattern>/job.py's `query`, its stateful call (or Spark's
    join) in `build`: the read, the key, the stateful call and the write in one file."""
    path = ROOT / "jobs" / patterns.module_name(pattern) / "job.py"
    functions = {f.name: ast.get_source_segment(path.read_text(), f) for f in ast.parse(path.read_text()).body
                 if isinstance(f, ast.FunctionDef)}
    assert 'readStream.format("kafka")' in functions["query"] and 'writeStream.format("kafka")' in functions["query"]
    assert "build(" in functions["query"]
    assert ".groupBy(" in functions["build"] and ".transformWithState(" in functions["build"] or ".join(" in functions["build"]
