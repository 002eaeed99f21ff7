"""The grader's fast stage: named scenarios through a candidate's processors, no Spark, no Kafka.

A scenario is a JSON file: a name, what it checks in words (`says`), the input events in arrival
order cut into micro-batches, and what a consumer of the output topic must end with (`expect`:
the last view per key, as the job's `actual` reads the topic). The pattern's stages run as its
query chains them (joinlab.in_memory), with the job's default settings, so a scenario means the
same for every candidate and every machine.

    {"name": "tweet-before-its-author", "says": "...",
     "batches": [[{"topic": "tweets", "key": "10", "value": {...}}], [...]],
     "expect": {"10": {...}}}

`expect` is written by the reference (`joinlab interview scenarios --refresh`), never by hand, and
a test keeps every stored expectation equal to what the reference says today.
"""
from __future__ import annotations

import contextlib
import json
import os
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType

from joinlab import patterns
from joinlab.generate import Record


@dataclass
class Scenario:
    name: str
    says: str
    batches: list[list[dict]]
    expect: dict
    path: Path | None = None
    hidden: bool = False

    def records(self) -> list[list[Record]]:
        return [[Record(e["topic"], str(e["key"]).encode(), json.dumps(e["value"]).encode(), "event") for e in batch]
                for batch in self.batches]


@dataclass
class Outcome:
    scenario: Scenario
    got: dict = field(default_factory=dict)
    error: str | None = None  # the candidate's code raised: its traceback, shortened
    dead: dict = field(default_factory=dict)  # key -> reason, for the patterns whose job dead-letters a key

    @property
    def ok(self) -> bool:
        return self.error is None and self.got == self.scenario.expect

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


def load(path: Path, hidden: bool = False) -> Scenario:
    body = json.loads(path.read_text())
    return Scenario(body["name"], body["says"], body["batches"], body.get("expect", {}), path, hidden)


def load_dir(directory: Path | None, hidden: bool = False) -> list[Scenario]:
    """Every *.json scenario in `directory`, by file name (the order the prompt lists them in)."""
    if directory is None or not directory.is_dir():
        return []
    return [load(p, hidden) for p in sorted(directory.glob("*.json"))]


SETTINGS = ("LOTTERY_SEED", "LOTTERY_WATERMARK_DELAY", "MONEY_WATERMARK_DELAY", "MONEY_SESSION_DURATION",
            "MONEY_WAIT_LIMIT", "MONEY_DEDUP_HORIZON", "MONEY_USERS_SNAPSHOT")


@contextlib.contextmanager
def default_settings():
    """The jobs' default settings while grading: a scenario's expectation (and a pack's stored live
    expectation) was computed with them, so a setting left in the environment must not change it."""
    saved = {name: os.environ.pop(name) for name in SETTINGS if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def run(pattern: str, solution: ModuleType | None, scenario: Scenario) -> Outcome:
    """The scenario's batches through the solution's processors; the views a consumer keeps."""
    outcome = Outcome(scenario)
    try:
        with default_settings():
            p = patterns.job(pattern).InMemory(solution)
            batches = [p.rows(batch) for batch in scenario.records()]
            out = p.run(batches)
            outcome.got = plain(p.views(out))
            outcome.dead = p.dead_letters(out) if hasattr(p, "dead_letters") else {}
    except Exception:  # the candidate's code: any error is a result to show, not a crash
        outcome.error = _short_traceback()
    return outcome


def expected_by_reference(pattern: str, scenario: Scenario) -> dict:
    """What the batch reference says the scenario must end with (for --refresh and the tests)."""
    reference = patterns.reference(pattern)
    records = [r for batch in scenario.records() for r in batch]
    with default_settings():
        return plain(reference.expected(records))


def _short_traceback() -> str:
    """The error and the frames of the candidate's own file (not pyspark's or the lab's)."""
    lines = traceback.format_exc().rstrip().splitlines()
    frames = [i for i, line in enumerate(lines) if line.startswith('  File "')]
    own = [i for i in frames if "/site-packages/" not in lines[i] and "/joinlab/" not in lines[i]]
    keep = own[-2:] if own else frames[-1:]
    shown = []
    for i in keep:
        shown += lines[i:i + 2]
    return "\n".join(shown + lines[-1:])


# --- Telling a candidate what went wrong -----------------------------------------------------------

def describe(outcome: Outcome, key_name: str) -> list[str]:
    """A failed scenario in words: what it checks, its input in arrival order, and per key what was
    expected and what came out (only the fields that differ)."""
    s = outcome.scenario
    out = [f"FAIL {s.name}" + (" (held back)" if s.hidden else ""), f"  {s.says}", "  input, in arrival order:"]
    for number, batch in enumerate(s.batches, 1):
        for event in batch:
            out.append(f"    batch {number}  {event['topic']:<18} {json.dumps(event['value'], separators=(',', ':'))}")
    if outcome.error:
        out.append("  your code raised:")
        out += ["    " + line for line in outcome.error.splitlines()]
        return out
    want, got = s.expect, outcome.got
    for key in list(want) + [k for k in got if k not in want]:
        if key not in got:
            why = f" (dead-lettered: {outcome.dead[key]})" if key in outcome.dead else ""
            out.append(f"  {key_name} {key}: expected {_brief(want[key])}, got nothing{why}")
        elif key not in want:
            out.append(f"  {key_name} {key}: expected nothing, got {_brief(got[key])}")
        elif got[key] != want[key]:
            fields = list(want[key]) + [f for f in got[key] if f not in want[key]]
            diff = [f"{f}={want[key].get(f)!r} (got {got[key].get(f)!r})" for f in fields
                    if want[key].get(f) != got[key].get(f)]
            out.append(f"  {key_name} {key}: expected " + ", ".join(diff))
    return out


def _brief(view: dict, fields: int = 6) -> str:
    items = list(view.items())
    text = ", ".join(f"{k}={v!r}" for k, v in items[:fields])
    return "{" + text + (", ..." if len(items) > fields else "") + "}"
