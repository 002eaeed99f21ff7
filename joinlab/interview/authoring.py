"""`joinlab interview scenarios PATTERN --refresh`: a scenario's expectation is written by the batch
reference (its dead letters by the lab's solution), never by hand, in one layout (an event per
line) so that a diff shows what changed."""
from __future__ import annotations

import json
from pathlib import Path

from joinlab.interview import exercise
from joinlab.interview import scenarios as fast


def dump(scenario: fast.Scenario) -> str:
    batches = ",\n".join("  [\n" + ",\n".join("   " + json.dumps(e) for e in batch) + "\n  ]"
                         for batch in scenario.batches)
    expect = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in scenario.expect.items())
    dead = "" if scenario.expect_dead is None else f',\n "expect_dead": {json.dumps(scenario.expect_dead)}'
    return (f'{{\n "name": {json.dumps(scenario.name)},\n "says": {json.dumps(scenario.says)},\n'
            f' "batches": [\n{batches}\n ],\n "expect": {{\n{expect}\n }}{dead}\n}}\n').replace("{\n\n }", "{}")


def refresh(pattern: str, directories: list[Path] | None = None) -> list[str]:
    """Rewrite every scenario of `pattern` with the reference's expectation; returns what changed."""
    ex = exercise(pattern)
    changed = []
    for directory in directories or [ex.scenarios(), ex.hidden()]:
        for scenario in fast.load_dir(directory):
            before = scenario.path.read_text()
            scenario.expect = fast.expected_by_reference(pattern, scenario)
            scenario.expect_dead = fast.dead_by_solution(pattern, scenario)
            after = dump(scenario)
            if after != before:
                scenario.path.write_text(after)
                changed.append(str(scenario.path))
    return changed
