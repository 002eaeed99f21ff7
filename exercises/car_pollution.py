"""Exercise 2 (one-to-many, 45-60 min): car pollution. Read car_pollution.md first
(in the lab: jobs/car_pollution/README.md, the part above its solution marker).

Write the two stateful processors the job chains (everything else is given: jobs/car_pollution/job.py
parses both topics, dead-letters malformed records, keys and wires the two stages, writes the
output topic):

Stage 1, CarMovesProcessor, grouped by (entity, entity_id): ("car", car_id) for an arrival,
("zone", zone_id) for a reading. Input rows have the columns

    entity, entity_id, car_id, plate, to_zone_id, fuel_level, zone_id, pollution_level, seq, event_time

(an arrival fills the car columns, a reading zone_id and pollution_level; seq counts each car's
and each zone's events 1, 2, 3, ... in event-time order). Yield stage 2's rows, made with the
row contract's op_row (given.py, columns OP; imported below), which stage 2 gets grouped by zone_id:

    op_row(ADD, zone_id, arrival_row)             a car is (now) in zone_id
    op_row(DEL, zone_id, car_id=.., car_seq=..)   a car left zone_id (its entry of seq car_seq)
    op_row(READING, zone_id, reading_seq=.., pollution_level=.., reading_time=..)

Stage 2, ZoneCarsProcessor, grouped by zone_id: yield the output rows, columns VIEW
of given.py:

    Row(op="ADD" or "DEL", car_id=.., car_seq=.., plate=.., zone_id=.., fuel_level=.., car_time=..,
        reading_seq=.., pollution_level=.., reading_time=..)

The output topic is keyed by car_id; a consumer keeps, per car, the record with the highest
(car_seq, op, reading_seq), a DEL ranking above the ADD it retracts. Every car must end with its
latest zone's latest reading (or no reading, if the zone never reported).

State lives in `handle` (set up in init): getValueState(name, "field type, ..."),
getMapState(name, "key type", "field type, ..."). A ValueState has exists(), get(), update(tuple),
clear(); a MapState containsKey((k,)), getValue((k,)), updateValue((k,), tuple), removeKey((k,)),
iterator() of ((k,), value), keys(), values().

Grade it: `make check-fast`, then `make check` (in a workspace), or in the lab
`joinlab interview check car-pollution --solution THIS_FILE`.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.car_pollution.given import ADD, DEL, READING, op_row  # noqa: F401 (stage 1's row kinds and maker)


class CarMovesProcessor(StatefulProcessor):
    """Stage 1: per car, where it is; per zone, its readings (forward them to stage 2)."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: the state a car needs.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        # TODO: ADD (and DEL) for cars, READING for zones.
        return iter(())

    def close(self) -> None:
        pass


class ZoneCarsProcessor(StatefulProcessor):
    """Stage 2: per zone, its latest reading and the cars in it."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # TODO: the state a zone needs.

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        # TODO: a view per car that changed (and every car of the zone when its reading changes).
        return iter(())

    def close(self) -> None:
        pass
