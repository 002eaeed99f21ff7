"""Wrong answer: the lab's lottery processors with their state in dicts on the processor object
(tests/wrong_answers/_on_self.py): right in one process, wrong after a restart."""
import sys
from pathlib import Path

from jobs.lottery import solution

sys.path.insert(0, str(Path(__file__).parent))  # graded as a file: its helper is the file beside it
from _on_self import on_self  # noqa: E402

LotteryGate = on_self(solution.LotteryGate)
Coupons = on_self(solution.Coupons)
