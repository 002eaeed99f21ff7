"""What every bench step shares: a deadline, the error it raises, and its progress line on stderr.

Why: a step must fail with a message that says what did not finish, never hang."""
from __future__ import annotations

import sys
import time


class BenchError(RuntimeError):
    """A step failed or missed its deadline; the message says which and what to try."""


class Deadline:
    """A wall-clock budget for one step: `check()` raises BenchError once it is spent."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds

    def check(self, detail: str = "") -> None:
        if time.monotonic() > self.end:
            raise BenchError(f"{self.what} did not finish within {self.seconds:.0f} s"
                             + (f" ({detail})" if detail else ""))


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)
