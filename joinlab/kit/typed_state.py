"""Named state values: a small NamedTuple per stored value, its DDL derived from it.

    class Car(NamedTuple):
        seq: int
        zone_id: int

    self.car = handle.getValueState("car", ddl(Car))
    car = load(Car, self.car.get())   # Car(seq=3, zone_id=7), or None when the key has none

A list of NamedTuples is stored as an array of structs, so one value can hold a key's whole
buffer: read once per key and batch, written once. Why it matters: every state call is a
synchronous round trip to the JVM, so a key's state is best read and written whole.
"""
from __future__ import annotations

import datetime
import types
import typing
from typing import Any, Callable, NamedTuple, TypeVar, get_args, get_origin, get_type_hints

_SQL = {int: "bigint", str: "string", float: "double", bool: "boolean", datetime.datetime: "timestamp",
        datetime.date: "date", bytes: "binary"}
T = TypeVar("T", bound=tuple)


def _unoptional(kind):
    """X from Optional[X] / X | None."""
    if get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return kind


def _is_named(kind) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")


def _sql(kind) -> str:
    kind = _unoptional(kind)
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        return f"array<{_sql(item)}>"
    if _is_named(kind):
        return "struct<" + ", ".join(f"{name} {_sql(k)}" for name, k in get_type_hints(kind).items()) + ">"
    if kind not in _SQL:
        raise TypeError(f"no Spark type for {kind!r}: use int, str, float, bool, datetime, date, bytes, "
                        "a NamedTuple, a list of one of them, or X | None")
    return _SQL[kind]


def ddl(cls: type[NamedTuple]) -> str:
    """The state schema of `cls`: 'name type, ...' (lists of NamedTuples: array<struct<...>>)."""
    return ", ".join(f"{name} {_sql(kind)}" for name, kind in get_type_hints(cls).items())


# Each type's converter, worked out once, since `load` runs for every key read. A dict, not
# functools.lru_cache: a processor pickled by value (joinlab.spark.equip) takes this module's
# functions with it, and a cached function is pickled by reference, which a server without the lab
# cannot import. Bounded: a long-lived Python worker may unpickle classes again.
_CONVERTERS: dict[Any, Callable[[Any], Any] | None] = {}


def _converter(kind) -> Callable[[Any], Any] | None:
    """How a stored value of `kind` becomes the Python one (nested structs come back as Rows), or
    None where it is used as stored."""
    if kind not in _CONVERTERS:
        if len(_CONVERTERS) >= 256:
            _CONVERTERS.clear()
        _CONVERTERS[kind] = _convert(kind)
    return _CONVERTERS[kind]


def _convert(kind) -> Callable[[Any], Any] | None:
    kind = _unoptional(kind)
    if get_origin(kind) is list:
        item = _converter(get_args(kind)[0])
        return item and (lambda value: None if value is None else [item(v) for v in value])
    if _is_named(kind):
        fields = [_converter(k) for k in get_type_hints(kind).values()]
        if not any(fields):
            return lambda value: None if value is None else kind(*value)
        fields = [f or (lambda v: v) for f in fields]
        return lambda value: None if value is None else kind(*(f(v) for f, v in zip(fields, value)))
    return None


def load(cls: type[T], value: tuple | None) -> T | None:
    """`cls` from a stored value (nested structs come back as Rows), or None for no value."""
    return _converter(cls)(value)


def grouping_key(key: tuple) -> tuple:
    """The grouping key as Spark hands it; pyspark's TwsTester wraps a timer's tuple key as (key,)."""
    return key[0] if len(key) == 1 and isinstance(key[0], tuple) else key


class KeyState:
    """A key's state as one named value with a `timer` field, and that one timer (at the earliest
    moment the key has something to do, not one per event): read at most once per micro-batch,
    written only when it changed.

        self.pending = KeyState(handle, "pending", Pending, Pending(None, [], []))
        value = self.pending.get(key, timerValues)           # in handleInputRows
        value = self.pending.get(key, timerValues, expired)  # in handleExpiredTimer: that timer goes
        self.pending.put(key, value._replace(events=...), due_ms)

    `empty` (its timer None) is what a key without state reads; putting it clears the value. The
    cache only holds what was read or written at the same processing time and watermark, and the
    processor is initialised afresh for every task, so a retried task reads state again."""

    def __init__(self, handle, name: str, cls: type[T], empty: T):
        self.handle, self.cls, self.empty = handle, cls, empty
        self.state = handle.getValueState(name, ddl(cls))
        self._batch: tuple | None = None
        self._stored: dict = {}  # grouping key -> its value as stored now
        self._timers: dict = {}  # grouping key -> its timer registered now (the firing one is going)

    def get(self, key: tuple, timer_values, expired=None) -> T:
        """The key's value, `empty` for a new key. `expired`:
        the ExpiredTimerInfo of the timer firing now, which Spark deletes after the call."""
        batch = (timer_values.getCurrentProcessingTimeInMs(), timer_values.getCurrentWatermarkInMs())
        if batch != self._batch:
            self._batch, self._stored, self._timers = batch, {}, {}
        key = grouping_key(key)
        if key not in self._stored:
            stored = load(self.cls, self.state.get())
            self._stored[key] = self.empty if stored is None else stored
            self._timers[key] = self._stored[key].timer
        if expired is not None and self._timers[key] == expired.getExpiryTimeInMs():
            self._timers[key] = None  # deleted by Spark, not by us
        return self._stored[key]._replace(timer=self._timers[key])

    def put(self, key: tuple, value: T, due_ms: int | None, ahead: bool = False) -> T:
        """Store the key's value (read with get() in this batch) with its one timer at `due_ms`
        (None: no timer). Spark fires a timer at or behind the batch's watermark in this same
        batch, after the input: a stage sweeps what is due when it fires. So a registered timer
        already due is kept; a new one due is registered as it is (it fires in this batch), unless
        `ahead` sets it just past the watermark, for a caller whose timers must lie ahead of it.
        Returns the value as stored."""
        key = grouping_key(key)
        registered, watermark = self._timers[key], self._batch[1]
        if due_ms is not None and due_ms <= watermark:
            if registered is not None and registered <= watermark:
                due_ms = registered
            elif ahead:
                due_ms = watermark + 1
        if due_ms != registered:
            if registered is not None:
                self.handle.deleteTimer(registered)
            if due_ms is not None:
                self.handle.registerTimer(due_ms)
            self._timers[key] = due_ms
        value = value._replace(timer=due_ms)
        if value != self._stored[key]:
            if value == self.empty:
                self.state.clear()
            else:
                self.state.update(value)
            self._stored[key] = value
        return value
