"""The registry of patterns, and what a pattern is: joinlab never imports a pattern by name, it
asks here. pyproject.toml's `joinlab.patterns` entry point names their table (jobs.PATTERNS); a
pattern's generator and batch reference share its module name in generators/ and references/.
`Job` and `Reference` are the contract their modules fulfil (docs/adding-a-pattern.md);
tests/test_patterns.py checks every registered pattern against it, with all its other parts.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter

    from joinlab.kit.events import EventSchema
    from joinlab.kit.kafka import Kafka
    from joinlab.kit.stages import Stage


@dataclass(frozen=True)
class Interview:
    """The pattern as an interview exercise (joinlab.interview)."""
    level: str      # e.g. "1, warm-up"
    time_box: str   # e.g. "30-45 min"
    key: str        # what one output key is, in the grader's messages: "tweet"


@dataclass(frozen=True)
class Lookup:
    """A topic the lab's lookup service serves over HTTP (joinlab.lookup): the first valid record
    of `schema` per `key`, which the job asks for what arrives too late to join in state."""
    schema: EventSchema
    key: str


@runtime_checkable
class Job(Protocol):
    """A pattern's parts (jobs/<module>/parts.py gathers them): what joinlab reads of it."""
    INPUT_TOPICS: list[str]
    OUTPUT_TOPICS: list[str]       # its dead-letter topic among them
    DEAD_LETTERS_TOPIC: str
    STAGES: list[Stage]            # its query's keyed stateful calls (joinlab.kit.stages), in query order
    SOLUTION: str                  # the module of the lab's own processors
    PROCESSORS: tuple[str, ...]    # what a solution module defines: stages.processors(STAGES), and any other part a candidate writes
    SPARK_CONF: dict[str, str]     # settings its queries start with (fixed in their checkpoint)
    SETTINGS: tuple[str, ...]      # the environment variables its settings read
    LOOKUP: Lookup | None          # a topic it asks the lookup service about; None: it asks none
    INTERVIEW: Interview
    InMemory: type                 # STAGES in memory: a joinlab.kit.in_memory.Chain with rows() and views()

    def query(self, spark: SparkSession, kafka: Kafka, solution: ModuleType | None = None) -> DataStreamWriter:
        """The query, Kafka to Kafka: readStream, `build`, writeStream (the runner names and starts it)."""

    def build(self, raw: DataFrame, solution: ModuleType | None = None) -> DataFrame:
        """The query's heart: Kafka records in (the connector's columns), Kafka records (topic, key, value) out."""

    def actual(self, records: list) -> dict:
        """Key -> the view a consumer of the output topics keeps."""

    def version(self, view: dict) -> tuple:
        """A view's version: a consumer keeps the highest."""


@runtime_checkable
class Reference(Protocol):
    """A pattern's batch reference (references/<module>.py): plain Python, no Spark."""

    def expected(self, records: list) -> dict:
        """Key -> the view the output must end with, from the input records."""

    def actual(self, records: list) -> dict:
        """The job's `actual`."""

    def version(self, view: dict) -> tuple:
        """The job's `version`."""

    def final_watermark_ms(self, records: list) -> int | None:
        """The watermark after which the job has decided all of `records`; None: no event time."""

    def notes(self, records: list) -> list[str]:
        """Lines on how the output records were made (joinlab verify prints them); [] for none."""


# pattern name -> its job module's import path, simplest first
PATTERNS = {name: module for entry in entry_points(group="joinlab.patterns")
            for name, module in entry.load().items()}


def module_name(pattern: str) -> str:
    """The pattern's file name: tweet-views -> tweet_views."""
    if pattern not in PATTERNS:
        raise SystemExit(f"unknown pattern {pattern!r}; choose one of: {', '.join(PATTERNS) or 'none registered'}"
                         + ("" if PATTERNS else " (the lab is not installed: run make install)"))
    return pattern.replace("-", "_")


def packages() -> list[str]:
    """The top-level packages the patterns' modules are in (`jobs`): what a query sends a server
    without the lab, with joinlab (joinlab.spark.equip)."""
    return sorted({module.split(".")[0] for module in PATTERNS.values()})


def name(job: Job) -> str:
    """The pattern whose parts `job` is: jobs.tweet_views.parts -> tweet-views."""
    return next(p for p, module in PATTERNS.items() if module == job.__name__)


def job(pattern: str) -> Job:
    module_name(pattern)
    return importlib.import_module(PATTERNS[pattern])


def generator(pattern: str) -> ModuleType:
    return importlib.import_module(f"generators.{module_name(pattern)}")


def reference(pattern: str) -> Reference:
    return importlib.import_module(f"references.{module_name(pattern)}")


def alternatives(pattern: str) -> ModuleType:
    """The pattern's comparison of simpler designs (references/<module>_alternatives.py)."""
    try:
        return importlib.import_module(f"references.{module_name(pattern)}_alternatives")
    except ModuleNotFoundError:
        raise SystemExit(f"{pattern} has no comparison of alternatives; these do: "
                         f"{', '.join(with_alternatives())}") from None


def with_alternatives() -> list[str]:
    """The patterns that have a comparison of simpler designs, found without importing it (none
    where the references are not installed: a candidate's workspace)."""
    return [p for p in PATTERNS if _findable(f"references.{module_name(p)}_alternatives")]


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there at all
        return False


def all_topics(pattern: str) -> list[str]:
    module = job(pattern)
    return list(module.INPUT_TOPICS) + list(module.OUTPUT_TOPICS)


def lookups() -> dict[str, Lookup]:
    """pattern -> the topic its job asks the lookup service about, for the patterns that ask one."""
    return {p: job(p).LOOKUP for p in PATTERNS if job(p).LOOKUP is not None}


def settings_env() -> set[str]:
    """Every environment variable a pattern's settings read."""
    return {name for p in PATTERNS for name in job(p).SETTINGS}
