"""Car pollution, the solution's two processors (the wiring: jobs/car_pollution/job.py): a car's
moves keyed by car (CarMovesProcessor), then each zone's reading and cars keyed by zone (ZoneCarsProcessor).
Stale events (a lower per-entity `seq` than the stored one) are ignored, so the last record per
car never depends on arrival order. Each key's state is read at most once per micro-batch (every
state call is a round trip to the JVM). State is bounded by the fleet: one entry per car and one
per zone and car in it (jobs/car_pollution/README.md, "State").
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterator, NamedTuple

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from jobs.car_pollution.given import ADD, DEL, READING, op_row
from joinlab.kit.typed_state import ddl, load


class Car(NamedTuple):
    """Stage 1's state of a car: its latest arrival's seq and zone."""
    seq: int
    zone_id: int


class Reading(NamedTuple):
    """A zone's latest reading."""
    seq: int
    pollution_level: float
    event_time: datetime


class CarInZone(NamedTuple):
    """A car in a zone (MapState value, keyed by car_id)."""
    seq: int
    plate: str
    fuel_level: float
    event_time: datetime


class CarMovesProcessor(StatefulProcessor):
    """Stage 1, keyed by (entity, id). For a car: its latest arrival wins; a move to another zone
    emits DEL(old zone) then ADD(new zone), a move within the same zone only ADD (so the car is
    never deleted from the zone it is in). Readings are forwarded unchanged."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.car = handle.getValueState("car", ddl(Car))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        rows = list(rows)  # the rows of one car, or of one zone: its readings pass through
        if rows[0].entity == "zone":
            for r in rows:
                yield op_row(READING, r.zone_id, reading_seq=r.seq, pollution_level=r.pollution_level,
                          reading_time=r.event_time)
            return
        stored = load(Car, self.car.get())  # None for a new car
        latest = max(rows, key=lambda r: r.seq)
        if stored is not None and latest.seq <= stored.seq:
            return  # stale or duplicate
        if stored is not None and stored.zone_id != latest.to_zone_id:
            yield op_row(DEL, stored.zone_id, car_id=latest.car_id, car_seq=stored.seq)
        self.car.update(Car(latest.seq, latest.to_zone_id))
        yield op_row(ADD, latest.to_zone_id, latest)


class ZoneCarsProcessor(StatefulProcessor):
    """Stage 2, keyed by zone: the latest reading and the cars in the zone (tall: one MapState entry per car).
    Emits a car's view on ADD (pollution NULL while the zone has no reading: a left join), every
    car of the zone on a newer reading, and a DEL record when a car leaves."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.reading = handle.getValueState("reading", ddl(Reading))
        self.cars = handle.getMapState("cars", "car_id bigint", ddl(CarInZone))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        zone_id = key[0]
        reading = load(Reading, self.reading.get())
        reading_changed, added, removed = False, {}, []
        for r in rows:
            if r.op == READING:
                if reading is None or r.reading_seq > reading.seq:
                    reading, reading_changed = Reading(r.reading_seq, r.pollution_level, r.reading_time), True
            elif r.op == ADD:
                added[r.car_id] = CarInZone(r.car_seq, r.plate, r.fuel_level, r.car_time)
            else:
                removed.append(r)
        if reading_changed:
            self.reading.update(reading)
        # A new reading re-emits every car: read them all once, and the DELs find their cars there.
        cars = {car_id: CarInZone(*car) for (car_id,), car in self.cars.iterator()} if reading_changed else None
        for r in removed:  # a DEL retracts the entry stage 1 put here; a newer entry is kept
            if r.car_id in added:
                continue
            car = cars.get(r.car_id) if cars is not None else load(CarInZone, self.cars.getValue((r.car_id,)))
            if car is not None and car.seq <= r.car_seq:
                self.cars.removeKey((r.car_id,))
                if cars is not None:
                    del cars[r.car_id]
                yield self._view(DEL, zone_id, r.car_id, car, reading)
        for car_id, car in added.items():
            self.cars.updateValue((car_id,), car)
        if cars is not None:
            cars.update(added)
        for car_id, car in (cars if cars is not None else added).items():
            yield self._view(ADD, zone_id, car_id, car, reading)

    @staticmethod
    def _view(op: str, zone_id: int, car_id: int, car: CarInZone, reading: Reading | None) -> Row:
        seq, level, at = reading if reading is not None else (None, None, None)
        return Row(op=op, car_id=car_id, car_seq=car.seq, plate=car.plate, zone_id=zone_id, fuel_level=car.fuel_level,
                   car_time=car.event_time, reading_seq=seq, pollution_level=level, reading_time=at)
