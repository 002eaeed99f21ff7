"""The grader's fast stage: named scenarios through a candidate's processors, no Spark, no Kafka;
for a pattern of Spark's own join (no STAGES, the candidate writes functions of its query), through
that query on a local Spark session, one micro-batch per batch (its InMemory, joinlab.microbatch).

A scenario is a JSON file: a name, what it checks in words (`says`), the input events in arrival
order cut into micro-batches, and what a consumer of the output topic must end with (`expect`:
the last view per key, as the job's `actual` reads the topic). The pattern's stages run as its
query chains them (joinlab.kit.in_memory), with the job's default settings, so a scenario means the
same for every candidate and every machine.

    {"name": "tweet-before-its-author", "says": "...",
     "batches": [[{"topic": "tweets", "key": "10", "value": {...}}], [...]],
     "expect": {"10": {...}}}

`expect` is written by the reference (`joinlab interview scenarios --refresh`), never by hand.
Where the pattern's processors dead-letter keys (its InMemory has `dead_letters`), `expect_dead` (key -> the
reason's words before its first ":"), written by the lab's solution, says what must reach the
dead-letter topic. Besides as sent, every scenario runs as Spark may run it (VARIANTS).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType

from joinlab import patterns
from joinlab.generate import Record
from joinlab.kit.in_memory import restart
from joinlab.interview import exercise

# What the fast stage plays besides the events as sent: what it means when only that fails; how it plays.
AS_SENT, RESTART, REORDERED = "as sent", "after a restart", "rows reordered"
VARIANTS = {
    RESTART: ("passes in one process but not after a restart: state kept outside the handle's state variables "
              "is lost", "input, in arrival order, with a new processor object before each batch over the same "
              "state (Spark makes one for every micro-batch, and on a restart):"),
    REORDERED: ("depends on the order of rows within a micro-batch", "input, each batch's rows in another order "
                "(Spark keeps only the order of records with the same topic and key):"),
}


@dataclass
class Scenario:
    name: str
    says: str
    batches: list[list[dict]]
    expect: dict
    path: Path | None = None
    hidden: bool = False
    expect_dead: dict | None = None  # None: the pattern's processors dead-letter nothing

    def batches_as(self, variant: str) -> list[list[dict]]:
        return [reordered(b) for b in self.batches] if variant == REORDERED else self.batches

    def records(self, variant: str = AS_SENT) -> list[list[Record]]:
        return [[Record(e["topic"], str(e["key"]).encode(), json.dumps(e["value"]).encode(), "event") for e in batch]
                for batch in self.batches_as(variant)]


def reordered(batch: list[dict]) -> list[dict]:
    """The batch reversed, except that events of the same topic and key keep their order: they share
    a Kafka partition, read in order; any other two events can reach a processor either way."""
    same = {}
    for e in batch:
        same.setdefault((e["topic"], str(e["key"])), []).append(e)
    return [same[(e["topic"], str(e["key"]))].pop(0) for e in reversed(batch)]


def reasons(dead: dict) -> dict:
    """Dead letters' reasons as compared: the words before the first ":" (the rest is free text)."""
    return {key: text.split(":")[0].strip() for key, text in dead.items()}


@dataclass
class Outcome:
    scenario: Scenario
    variant: str = AS_SENT
    got: dict = field(default_factory=dict)
    error: str | None = None  # the candidate's code raised: its traceback, shortened
    dead: dict = field(default_factory=dict)  # key -> reason, for the patterns whose job dead-letters a key

    @property
    def dead_ok(self) -> bool:
        return self.scenario.expect_dead in (None, reasons(self.dead))

    @property
    def ok(self) -> bool:
        return self.error is None and self.got == self.scenario.expect and self.dead_ok

    @property
    def emitted_nothing(self) -> bool:
        return self.error is None and not self.got


def plain(value):
    """Views as JSON holds them: times as ISO text, keys as text, so stored and fresh compare equal."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def load_dir(directory: Path | None, hidden: bool = False) -> list[Scenario]:
    """Every *.json scenario in `directory`, by file name (the order the prompt lists them in)."""
    if directory is None or not directory.is_dir():
        return []
    bodies = [(path, json.loads(path.read_text())) for path in sorted(directory.glob("*.json"))]
    return [Scenario(body["name"], body["says"], body["batches"], body.get("expect", {}), path, hidden,
                     body.get("expect_dead")) for path, body in bodies]


@contextlib.contextmanager
def default_settings():
    """The jobs' default settings while grading: a scenario's expectation (and a pack's stored live
    expectation) was computed with them, so a setting left in the environment must not change it."""
    saved = {name: os.environ.pop(name) for name in patterns.settings_env() if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def run(pattern: str, solution: ModuleType | None, scenario: Scenario, variant: str = AS_SENT) -> Outcome:
    """The scenario's batches through the solution's processors; the views a consumer keeps."""
    outcome = Outcome(scenario, variant)
    try:
        with default_settings():
            p = patterns.job(pattern).InMemory(solution)
            if variant == RESTART:  # a new processor object before every batch, over the state so far
                batch = p.batch
                p.batch = lambda *args, **kwargs: restart(p) or batch(*args, **kwargs)  # restart returns None
            out = p.run([p.rows(batch) for batch in scenario.records(variant)])
            outcome.got = plain(p.views(out))
            outcome.dead = p.dead_letters(out) if p.dead_letters else {}
    except Exception:  # the candidate's code: any error is a result to show, not a crash
        outcome.error = _short_traceback()
    return outcome


def graded(pattern: str, solution: ModuleType | None, scenario: Scenario) -> dict:
    """The scenario as sent and in every variant, as the grader's report holds it: passed, and if not,
    its cause in one line and the first failed outcome in words (`describe`)."""
    outcomes = [run(pattern, solution, scenario, variant) for variant in (AS_SENT, *VARIANTS)]
    shown, key = next((o for o in outcomes if not o.ok), None), exercise(pattern).key
    return {"name": scenario.name, "hidden": scenario.hidden, "ok": shown is None, "error": outcomes[0].error,
            "variants": {o.variant: o.ok for o in outcomes}, "cause": shown and cause(outcomes, key),
            "details": [] if shown is None else describe(shown, key), "emitted_nothing": outcomes[0].emitted_nothing}


def cause(outcomes: list[Outcome], key_name: str) -> str:
    """A failed scenario's cause in one line: the variants that alone fail it, or its first difference."""
    if outcomes[0].ok:
        return "; ".join(VARIANTS[o.variant][0] for o in outcomes if not o.ok)
    if outcomes[0].error:
        return "your code raised " + outcomes[0].error.splitlines()[-1]
    return next(line.strip() for line in describe(outcomes[0], key_name)
                if line.startswith((f"  {key_name} ", "  dead letter ")))


def expected(pattern: str, records: list) -> dict:
    """What the batch reference says the output must end with, given `records` in arrival order."""
    with default_settings():
        return plain(patterns.reference(pattern).expected(records))


def expected_by_reference(pattern: str, scenario: Scenario) -> dict:
    """The scenario's expectation (for --refresh and the tests)."""
    return expected(pattern, [r for batch in scenario.records() for r in batch])


def dead_by_solution(pattern: str, scenario: Scenario) -> dict | None:
    """What the lab's solution dead-letters (key -> reason as compared), where the pattern's processors
    dead-letter keys (for --refresh: the reference computes views only)."""
    return reasons(run(pattern, None, scenario).dead) if patterns.job(pattern).InMemory.dead_letters else None


def _short_traceback() -> str:
    """The frames of the candidate's own file (not pyspark's or the lab's), then the error in one line."""
    lines = traceback.format_exc().rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    own = [i for i in frames if "/site-packages/" not in lines[i] and "/joinlab/" not in lines[i]]
    shown = [line for i in (own[-2:] if own else frames[-1:]) for line in lines[i:i + 2]]
    return "\n".join(shown + [_one_line(sys.exc_info()[1])])


def _one_line(error: BaseException) -> str:
    """`Type: message`, the message's first line. Spark's AnalysisException ends that line with ";"
    and appends the whole query plan; of the plan, only its first line follows: the operator Spark
    refused (e.g. the join, with the condition as Spark reads it), less Spark's expression ids."""
    text = str(error).strip().splitlines() or [""]
    line = f"{type(error).__name__}: {text[0]}" if text[0] else type(error).__name__
    if text[0].endswith(";") and len(text) > 1:
        line += " in " + re.sub(r"#\d+L?", "", text[1].lstrip("~ "))
    return line


def describe(outcome: Outcome, key_name: str) -> list[str]:
    """A failed scenario in words: what it checks, the variant that failed it, its input in arrival
    order, and per key what was expected and what came out (only the fields that differ)."""
    s = outcome.scenario
    out = [f"FAIL {s.name}" + (" (held back)" if s.hidden else ""), f"  {s.says}"]
    if outcome.variant in VARIANTS:
        out += [f"  It {VARIANTS[outcome.variant][0]}.", f"  {VARIANTS[outcome.variant][1]}"]
    else:
        out += ["  input, in arrival order:"]
    for number, batch in enumerate(s.batches_as(outcome.variant), 1):
        for event in batch:
            out.append(f"    batch {number}  {event['topic']:<18} {json.dumps(event['value'], separators=(',', ':'))}")
    if outcome.error:
        out.append("  your code raised:")
        out += ["    " + line for line in outcome.error.splitlines()]
        return out
    want, got = s.expect, outcome.got
    for key in {**want, **got}:  # every key of either, the expected ones first
        if key not in got:
            why = f" (dead-lettered: {outcome.dead[key]})" if key in outcome.dead else ""
            out.append(f"  {key_name} {key}: expected {_brief(want[key])}, got nothing{why}")
        elif key not in want:
            out.append(f"  {key_name} {key}: expected nothing, got {_brief(got[key])}")
        elif got[key] != want[key]:
            out.append(f"  {key_name} {key}: expected {differences(want[key], got[key])}")
    if not outcome.dead_ok:
        want, dead = s.expect_dead, reasons(outcome.dead)
        out += [f"  dead letter {key}: expected " + (f"reason {want[key]!r}" if key in want else "none")
                + (f", got {outcome.dead[key]!r}" if key in dead else ", got none")
                for key in sorted(set(want) | set(dead)) if want.get(key) != dead.get(key)]
    return out


def differences(want: dict, got: dict) -> str:
    """The fields of two views that differ: `name=expected (got actual), ...`."""
    return ", ".join(f"{f}={want.get(f)!r} (got {got.get(f)!r})" for f in {**want, **got} if want.get(f) != got.get(f))


def _brief(view: dict) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in list(view.items())[:6])
    return "{" + text + (", ..." if len(view) > 6 else "") + "}"


# --- Writing the expectations: `joinlab interview scenarios PATTERN --refresh` ----------------------
# One layout (an event per line), so that a diff of a refreshed scenario shows what changed.

def dump(scenario: Scenario) -> str:
    batches = ",\n".join("  [\n" + ",\n".join("   " + json.dumps(e) for e in batch) + "\n  ]"
                         for batch in scenario.batches)
    expect = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in scenario.expect.items())
    dead = "" if scenario.expect_dead is None else f',\n "expect_dead": {json.dumps(scenario.expect_dead)}'
    return (f'{{\n "name": {json.dumps(scenario.name)},\n "says": {json.dumps(scenario.says)},\n'
            f' "batches": [\n{batches}\n ],\n "expect": {{\n{expect}\n }}{dead}\n}}\n').replace("{\n\n }", "{}")


def refresh(pattern: str) -> list[str]:
    """Rewrite every scenario of `pattern` with the reference's expectation; returns what changed."""
    ex, changed = exercise(pattern), []
    for directory in (ex.scenarios(), ex.hidden()):
        for scenario in load_dir(directory):
            before = scenario.path.read_text()
            scenario.expect = expected_by_reference(pattern, scenario)
            scenario.expect_dead = dead_by_solution(pattern, scenario)
            after = dump(scenario)
            if after != before:
                scenario.path.write_text(after)
                changed.append(str(scenario.path))
    return changed
