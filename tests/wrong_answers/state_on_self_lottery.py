"""Wrong answer: the lab's lottery processors with their state in dicts on the processor object
(tests/wrong_answers/_on_self.py): right in one process, wrong after a restart."""
from jobs.lottery import solution
from tests.wrong_answers._on_self import on_self

LotteryGate = on_self(solution.LotteryGate)
Coupons = on_self(solution.Coupons)
