"""Wrong answer: the lab's car_pollution processors with their state in dicts on the processor object
(tests/wrong_answers/_on_self.py): right in one process, wrong after a restart."""
from jobs.car_pollution import solution
from tests.wrong_answers._on_self import on_self

CarMovesProcessor = on_self(solution.CarMovesProcessor)
ZoneCarsProcessor = on_self(solution.ZoneCarsProcessor)
