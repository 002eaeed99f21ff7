"""The one seam between a pattern's job and the code that does its join: a job's `build(raw,
solution=None)` takes its stateful processors from a *solution module*, the lab's own
(`job.SOLUTION`) or any module that defines the same names (`job.PROCESSORS`), e.g. a candidate's
file (docs/architecture.md#one-seam-per-pattern).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import typing
from contextlib import suppress
from pathlib import Path
from types import ModuleType


class SolutionError(Exception):
    """A solution module that cannot be used: missing file, import error, a processor not defined."""


def of(default: str, processors: tuple[str, ...], given: ModuleType | None = None) -> ModuleType:
    """`given`, or else the module named `default` (a job's SOLUTION), checked to define every
    name in `processors` (a job's PROCESSORS: its stages' processor classes, and any other part)."""
    module = given if given is not None else importlib.import_module(default)
    missing = [name for name in processors if getattr(module, name, None) is None]
    if missing:
        where = getattr(module, "__file__", None) or module.__name__
        raise SolutionError(f"{where} defines no {' and no '.join(missing)}: the job needs "
                            f"{', '.join(processors)}")
    return module


def from_file(path: str | Path) -> ModuleType:
    """Import a candidate's file as a module of its own name (two files never mix). Spark's Python
    workers cannot import that file, so its classes are pickled by value: the processor travels
    with the plan, on a local session and on the lab's standalone master alike."""
    path = Path(path).resolve()
    if not path.is_file():
        raise SolutionError(f"no such file: {path}")
    name = f"joinlab_candidate_{path.stem}_{abs(hash(str(path))) & 0xffffff:x}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise SolutionError(f"{path} does not import: {type(exc).__name__}: {exc}") from exc
    resolve_annotations(module)
    from pyspark import cloudpickle
    cloudpickle.register_pickle_by_value(module)
    return module


def resolve_annotations(module: ModuleType) -> None:
    """Turn the module's classes' postponed annotations (`from __future__ import annotations`)
    into the types they name, here where the module's globals exist: a class pickled by value
    reaches the workers without its module, and `typing.get_type_hints` there (named state's
    `ddl(User)`) could not find `User` by its name any more."""
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__ and "__annotations__" in vars(value):
            with suppress(Exception):  # an annotation that does not resolve stays as written
                value.__annotations__ = typing.get_type_hints(value)
