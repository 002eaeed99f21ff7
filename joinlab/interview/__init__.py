"""Interview mode: an exercise per pattern, a grader, and a candidate workspace without the answers.

    exercises/<module>.md            the prompt          exercises/<module>.py   the stub to edit
    exercises/scenarios/<module>/    visible scenarios   exercises/hidden/<module>/  held back

`joinlab interview check PATTERN` grades a solution module (a candidate's file) in two stages:
scenarios through its processors in memory (joinlab.interview.scenarios), then the real job on a
broker with seeded, disordered events and a restart from the checkpoint (joinlab.interview.live).
`joinlab interview pack PATTERN --out DIR` writes a workspace with no solution in it
(joinlab.interview.pack).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Exercise:
    pattern: str
    module: str       # file names: exercises/<module>.py, .md, scenarios/<module>/
    level: str
    time_box: str
    key: str          # what one output key is, in the grader's messages
    writes: tuple     # the classes the candidate writes (the job's PROCESSORS)

    def stub(self, root: Path = ROOT) -> Path:
        return root / "exercises" / f"{self.module}.py"

    def prompt(self, root: Path = ROOT) -> Path:
        return root / "exercises" / f"{self.module}.md"

    def scenarios(self, root: Path = ROOT) -> Path:
        return root / "exercises" / "scenarios" / self.module

    def hidden(self, root: Path = ROOT) -> Path:
        return root / "exercises" / "hidden" / self.module


EXERCISES = {e.pattern: e for e in [
    Exercise("tweet-views", "tweet_views", "1, warm-up", "30-45 min", "tweet", ("TweetViewsProcessor",)),
    Exercise("car-pollution", "car_pollution", "2, one-to-many", "45-60 min", "car",
             ("CarMovesProcessor", "ZoneCarsProcessor")),
    Exercise("lottery", "lottery", "3, event-time rules across two keys", "60-90 min", "outcome",
             ("LotteryGate", "Coupons")),
    Exercise("money-enrichment", "money_enrichment", "4, the hard one", "90 min", "transaction", ("SessionJoin",)),
]}


def exercise(pattern: str) -> Exercise:
    try:
        return EXERCISES[pattern]
    except KeyError:
        raise SystemExit(f"no exercise for {pattern!r}; choose one of: {', '.join(EXERCISES)}") from None
