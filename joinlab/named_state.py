"""Named state: a small NamedTuple per stored value, its Spark DDL derived from its fields, so a
processor reads `User(*state.get())` and writes `state.update(user)` with one definition of the
layout (no positions, no DDL string kept in step by hand).

    class User(NamedTuple):
        version: int
        name: str
    ddl(User) == "version bigint, name string"
"""
from __future__ import annotations

import datetime
import types
import typing

_SCALARS = {int: "bigint", str: "string", float: "double", bool: "boolean",
            datetime.datetime: "timestamp", datetime.date: "date", bytes: "binary"}


def _is_named_tuple(kind) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")


def _type(kind) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):  # X | None: Spark's fields are nullable anyway
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _type(rest[0])
    if origin in (list, tuple) and args:
        return f"array<{_type(args[0])}>"
    if _is_named_tuple(kind):
        return f"struct<{_fields(kind)}>"
    if kind in _SCALARS:
        return _SCALARS[kind]
    raise TypeError(f"no Spark type for {kind!r}: use int, str, float, bool, datetime, bytes, "
                    "a NamedTuple, a list of one of them, or X | None")


def _fields(cls) -> str:
    hints = typing.get_type_hints(cls)
    return ", ".join(f"{name} {_type(hints[name])}" for name in cls._fields)


def ddl(cls) -> str:
    """The DDL of a NamedTuple's fields, for getValueState / getMapState / getListState."""
    if not _is_named_tuple(cls):
        raise TypeError(f"{cls!r} is not a NamedTuple")
    return _fields(cls)
