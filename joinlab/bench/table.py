"""The bench's output: one Measurement per row, the table, the ratios between rows, the machine line.

Why ratios: absolute rates depend on the machine; ratios on one run's same events travel better."""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from joinlab.spark import spark_master


@dataclass
class Measurement:
    name: str
    records: int | None
    seconds: float | None
    note: str = ""

    @property
    def rate(self) -> float | None:
        if self.records is None or not self.seconds:
            return None
        return self.records / self.seconds


def _fmt_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.0f}"


def format_table(rows: list[Measurement]) -> str:
    header = ("measurement", "records", "seconds", "records/s", "note")
    cells = [(r.name, "-" if r.records is None else str(r.records),
              "-" if r.seconds is None else f"{r.seconds:.2f}", _fmt_rate(r.rate), r.note) for r in rows]
    widths = [max(len(header[i]), *(len(c[i]) for c in cells)) for i in range(4)]
    def line(c):
        return (f"{c[0]:<{widths[0]}}  {c[1]:>{widths[1]}}  {c[2]:>{widths[2]}}  {c[3]:>{widths[3]}}  {c[4]}").rstrip()
    rule = "  ".join("-" * w for w in widths) + "  ----"
    return "\n".join([line(header), rule, *(line(c) for c in cells)])


def ratios(by_name: dict[str, Measurement]) -> list[str]:
    def rate(prefix: str) -> float | None:
        found = [m for name, m in by_name.items() if name.startswith(prefix)]
        return found[0].rate if found else None

    pairs = [("confluent-kafka vs kafka-python consume", "1a", "1b"),
             ("Spark source (stream) vs confluent-kafka raw", "2a", "1a"),
             ("Spark source (batch) vs confluent-kafka raw", "2b", "1a"),
             ("tweet-views job vs Spark source (stream)", "3 ", "2a"),
             ("plain Python (TwsTester) vs job", "4a", "3 "),
             ("plain Python (dicts) vs job", "4b", "3 ")]
    out = []
    for label, top, bottom in pairs:
        a, b = rate(top), rate(bottom)
        out.append(f"  {label + ':':<48} " + (f"{a / b:6.2f}x" if a and b else "     -"))
    return out


def machine_line(broker: str, kafka_format: str) -> str:
    import pyspark
    return (f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, PySpark {pyspark.__version__}, "
            f"Spark master {spark_master()}, Kafka format '{kafka_format}', broker: {broker}")

