"""Topic records as pandas tables, so a cell can show what a topic holds right now. A value that is
not a JSON object stays visible (`raw`): the malformed records are part of what the notebooks show."""
from __future__ import annotations

import json
from contextlib import closing
from typing import Any, Iterable

import pandas as pd

from joinlab.topics import Consumed, end_offsets, partitions_of, plain_consumer


def _decode(value: bytes | None) -> Any:
    try:
        return json.loads(value)
    except (TypeError, ValueError):  # no value, not UTF-8, not JSON
        return None


def frame(records: Iterable[Consumed]) -> pd.DataFrame:
    """Records as a table: topic, partition, offset, time (Kafka timestamp), key, then the JSON
    value's fields flattened (`author.name`); a value that is not a JSON object stays in `raw`."""
    meta, bodies = [], []
    for r in records:
        body = _decode(r.value)
        meta.append({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                     "time": pd.Timestamp(r.timestamp_ms, unit="ms", tz="UTC"),
                     "key": r.key.decode("utf-8", "replace") if r.key is not None else None,
                     "raw": None if isinstance(body, dict) else (r.value or b"").decode("utf-8", "replace")})
        bodies.append(body if isinstance(body, dict) else {})
    df = pd.DataFrame(meta, columns=["topic", "partition", "offset", "time", "key", "raw"])
    if bodies:
        fields = pd.json_normalize(bodies).convert_dtypes()  # ids stay integers next to a malformed row
        fields.columns = [f"value.{c}" if c in df.columns else c for c in fields.columns]
        df = pd.concat([df, fields], axis=1)
    return df if df["raw"].notna().any() else df.drop(columns="raw")


def rows(df: pd.DataFrame, **equal: Any) -> pd.DataFrame:
    """The rows of `df` whose columns equal the given values (all of `df` if it lacks a column,
    e.g. the empty table `Lab.state` returns when the state cannot be read)."""
    for column, value in equal.items():
        if column in df.columns:
            df = df[(df[column] == value).fillna(False).astype(bool)]
    return df


def topic_ends(bootstrap: str, topics: Iterable[str]) -> dict[str, dict[str, int]]:
    """{topic: {partition: next offset}}, the same shape as a Spark Kafka source's offsets."""
    with closing(plain_consumer(bootstrap)) as consumer:
        ends = end_offsets(consumer, partitions_of(consumer, topics))
    out: dict[str, dict[str, int]] = {}
    for tp, offset in ends.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return out
