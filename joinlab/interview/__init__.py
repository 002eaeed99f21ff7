"""Interview mode: an exercise per pattern, a grader (grade.py: scenarios in memory, scenarios.py,
then the real job, live.py), and a candidate workspace without the answers (pack.py). The files of
an exercise, and the interviewer's guide: docs/interviewing.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from joinlab import patterns

ROOT = Path(__file__).resolve().parents[2]
# The line of a pattern's page that ends the candidate's prompt: what follows is the lab's solution.
MARKER = "<!-- solution: not in a candidate's workspace -->"


def prompt_text(page: Path) -> str:
    """The part of a pattern's page above MARKER: the prompt a candidate gets. A page without the
    marker is refused, so a page that lost it never hands the solution out."""
    lines = page.read_text().splitlines()
    if lines.count(MARKER) != 1:
        raise ValueError(f"{page} must hold the line {MARKER!r} exactly once")
    return "\n".join(lines[:lines.index(MARKER)]).rstrip() + "\n"


@dataclass(frozen=True)
class Exercise:
    """A pattern's exercise: what its job declares (INTERVIEW, PROCESSORS) and where its files are."""
    pattern: str
    module: str       # file names: exercises/<module>.py, jobs/<module>/README.md, scenarios/<module>/
    level: str
    time_box: str
    key: str          # what one output key is, in the grader's messages
    writes: tuple     # the names the candidate writes (the job's PROCESSORS)
    processors: bool  # they are StatefulProcessor classes (the job has STAGES); else functions of Spark's own query

    @property
    def what(self) -> str:
        """What the candidate writes, in the grader's messages: "processors" or "functions"."""
        return "processors" if self.processors else "functions"

    def stub(self) -> Path:
        return ROOT / "exercises" / f"{self.module}.py"

    def prompt(self) -> Path:
        """The pattern's page; the prompt is its part above MARKER (prompt_text)."""
        return ROOT / "jobs" / self.module / "README.md"

    def scenarios(self) -> Path:
        return ROOT / "exercises" / "scenarios" / self.module

    def hidden(self) -> Path:
        return ROOT / "exercises" / "hidden" / self.module


EXERCISES = list(patterns.PATTERNS)  # one exercise per registered pattern


def exercise(pattern: str) -> Exercise:
    if pattern not in patterns.PATTERNS:
        raise SystemExit(f"no exercise for {pattern!r}; choose one of: {', '.join(EXERCISES)}")
    job = patterns.job(pattern)
    return Exercise(pattern, patterns.module_name(pattern), job.INTERVIEW.level, job.INTERVIEW.time_box,
                    job.INTERVIEW.key, job.PROCESSORS, bool(job.STAGES))
