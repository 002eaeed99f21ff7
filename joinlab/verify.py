"""Is the job's output right? Its last record per key, compared with the batch reference
(joinlab.patterns.Reference); the comparison itself is the same for every pattern."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from joinlab import patterns
from joinlab.topics import read_own


@dataclass
class Report:
    pattern: str
    expected: int
    actual: int
    missing: list = field(default_factory=list)     # expected keys with no output at all
    extra: list = field(default_factory=list)       # output keys the reference does not have
    stale: list = field(default_factory=list)       # last output older than the reference
    mismatched: list = field(default_factory=list)  # same versions, different content (or newer)
    records: dict = field(default_factory=dict)     # records read per topic, inputs and outputs
    notes: list = field(default_factory=list)       # the pattern's own remarks on the output (reference.notes)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    @property
    def mismatches(self) -> int:
        return len(self.missing) + len(self.extra) + len(self.stale) + len(self.mismatched)

    def lines(self) -> list[str]:
        out = [f"{self.pattern}: {self.expected} expected, {self.actual} in output, "
               f"{self.mismatches} mismatches ({'OK' if self.ok else 'FAILED'})"]
        for label in ("missing", "extra", "stale", "mismatched"):
            keys = getattr(self, label)
            if keys:
                out.append(f"  {label}: {len(keys)}, e.g. {sorted(keys)[:3]}")
        return out + [f"  {note}" for note in self.notes]


def compare(pattern: str, expected: dict, actual: dict, version: Callable[[dict], tuple]) -> Report:
    report = Report(pattern, len(expected), len(actual))
    for key, want in expected.items():
        got = actual.get(key)
        if got is None:
            report.missing.append(key)
        elif version(got) < version(want):
            report.stale.append(key)
        elif got != want:
            report.mismatched.append(key)
    report.extra = [key for key in actual if key not in expected]
    return report


def verify(pattern: str, bootstrap: str) -> Report:
    """Read the pattern's input and output topics (this participant's: joinlab.topics.own) whole and compare."""
    job = patterns.job(pattern)
    return check(pattern, read_own(bootstrap, job.INPUT_TOPICS), read_own(bootstrap, job.OUTPUT_TOPICS))


def check(pattern: str, inputs: list, outputs: list) -> Report:
    """Compare the output records with the reference computed from the input records."""
    reference = patterns.reference(pattern)
    report = compare(pattern, reference.expected(inputs), reference.actual(outputs), reference.version)
    report.notes = reference.notes(outputs)
    report.records = Counter(record.topic for record in inputs + outputs)
    return report
