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
from typing import Any, NamedTuple, TypeVar, get_args, get_origin, get_type_hints

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


def _convert(kind, value: Any) -> Any:
    kind = _unoptional(kind)
    if value is None:
        return None
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        return [_convert(item, v) for v in value]
    if _is_named(kind):
        return load(kind, value)
    return value


def load(cls: type[T], value: tuple | None) -> T | None:
    """`cls` from a stored value (nested structs come back as Rows), or None for no value."""
    if value is None:
        return None
    hints = get_type_hints(cls)
    nested = [name for name, kind in hints.items() if not _SQL.get(_unoptional(kind))]
    if not nested:
        return cls(*value)
    return cls(*(_convert(hints[name], v) for name, v in zip(hints, value)))


def grouping_key(key: tuple) -> tuple:
    """The grouping key as Spark hands it; pyspark's TwsTester wraps a timer's tuple key as (key,)."""
    return key[0] if len(key) == 1 and isinstance(key[0], tuple) else key


class KeyCache:
    """The state values of this micro-batch's keys, written through: a key's value is read once
    per batch even when both handleInputRows and handleExpiredTimer need it. It only ever holds
    what the processor read or wrote in the same batch (same processing time and watermark), and
    the processor is initialised afresh for every task, so a retried task reads state again."""

    def __init__(self) -> None:
        self._batch: tuple | None = None
        self._values: dict = {}

    def get(self, key: tuple, timer_values, read):
        batch = (timer_values.getCurrentProcessingTimeInMs(), timer_values.getCurrentWatermarkInMs())
        if batch != self._batch:
            self._batch, self._values = batch, {}
        key = grouping_key(key)
        if key not in self._values:
            self._values[key] = read()
        return self._values[key]

    def put(self, key: tuple, value) -> None:
        self._values[grouping_key(key)] = value

    def peek(self, key: tuple):
        """The value read or written for `key` in this batch (None: neither)."""
        return self._values.get(grouping_key(key))


def move_timer(handle, registered: int | None, due: int | None) -> int | None:
    """Keep a key's one timer at `due` (None: no timer): the registered one is deleted when it
    moves. One timer per key, not one per event: Spark makes two round trips per fired timer,
    and registering an existing one again logs a warning. Returns the timer now registered."""
    if due != registered:
        if registered is not None:
            handle.deleteTimer(registered)
        if due is not None:
            handle.registerTimer(due)
    return due
