"""Wrong answer: the lab's money_enrichment processors with their state in dicts on the processor object
(tests/wrong_answers/_on_self.py): right in one process, wrong after a restart."""
from jobs.money_enrichment import solution
from tests.wrong_answers._on_self import on_self

SessionJoin = on_self(solution.SessionJoin)
