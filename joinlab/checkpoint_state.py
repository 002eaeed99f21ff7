"""The job's state read from its checkpoint with Spark's state data sources: what `joinlab state`
prints and what the notebooks show - the analogue of Flink's queryable state.

Why from the checkpoint: it is what a restart would resume from, read without touching the
running query (the last committed batch). `state-metadata` lists the stateful operators,
`statestore` reads one of them.
"""
from __future__ import annotations

import json

import pandas as pd


def declared(properties: str | None) -> list[dict]:
    """The state variables in a transformWithState operator's properties JSON ([] otherwise)."""
    try:
        variables = json.loads(properties or "{}").get("stateVariables", [])
        return [{"name": v["stateName"], "type": v["stateVariableType"]} for v in variables]
    except (TypeError, ValueError, KeyError, AttributeError):
        return []


def _state_variables(properties: str | None) -> list[str]:
    """'name (type)' of each state variable in a transformWithState operator's properties JSON."""
    return [f"{v['name']} ({v['type']})" for v in declared(properties)]


def _operators(spark, checkpoint: str) -> pd.DataFrame:
    return spark.read.format("state-metadata").load(checkpoint).toPandas()


def metadata(spark, checkpoint: str) -> pd.DataFrame:
    """One row per state store of each stateful operator (a stream-stream join has four, two per
    side), with the state variables of transformWithState operators."""
    df = _operators(spark, checkpoint)
    df["stateVariables"] = [_state_variables(props) for props in df["operatorProperties"]]
    return df[["operatorId", "operatorName", "stateStoreName", "numPartitions", "minBatchId", "maxBatchId",
               "stateVariables"]]


def operator_of(spark, checkpoint: str, var: str) -> int:
    """The id of the operator that declares state variable `var`. Why look it up: with chained
    transformWithState operators the ids are not the order of the stages (Spark numbers them
    from the sink back, so the last stage is operator 0)."""
    df = _operators(spark, checkpoint)
    found = sorted({int(op) for op, props in zip(df["operatorId"], df["operatorProperties"])
                    if var in {v["name"] for v in declared(props)}})
    if len(found) != 1:
        raise ValueError(f"state variable {var!r} is declared by {len(found)} operators {found} "
                         f"in {checkpoint}; pass operator_id")
    return found[0]


def read(spark, checkpoint: str, var: str | None = None, operator_id: int = 0, **options: str) -> pd.DataFrame:
    """One operator's state (one state variable of it, if `var`; `options` are the statestore
    source's, e.g. joinSide), struct columns flattened: key.zone_id -> zone_id, and
    `<struct>.<field>` where a field name repeats."""
    from pyspark.sql import functions as F
    # Spark's state reader loads RocksDB's snapshots through the state store coordinator, which a
    # session creates with its query manager: a session that has run no query yet (`joinlab state`)
    # must make it first, or every read fails with "Cannot find endpoint: StateStoreCoordinator".
    spark.streams.active
    reader = spark.read.format("statestore").option("operatorId", str(operator_id))
    if var is not None:
        reader = reader.option("stateVarName", var)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    df = reader.load(checkpoint)
    columns, seen = [], set()
    for field in df.schema.fields:
        if field.dataType.typeName() == "struct":
            for sub in field.dataType.fieldNames():
                name = sub if sub not in seen else f"{field.name}.{sub}"
                seen.add(name)
                columns.append(F.col(f"`{field.name}`.`{sub}`").alias(name))
        else:
            seen.add(field.name)
            columns.append(F.col(f"`{field.name}`"))
    return df.select(*columns).toPandas()


def refuse_unknown(only: list[str] | None, held: set[str], checkpoint: str) -> None:
    """Raise ValueError, naming the state variables `checkpoint` holds, if `only` names another."""
    held = {name for name in held if not name.startswith("$")}  # $...: Spark's own (timers)
    if unknown := [name for name in only or [] if name not in held]:
        raise ValueError(f"no state variable named {', '.join(unknown)} in {checkpoint}; "
                         f"it holds: {', '.join(sorted(held)) or 'none'}")


# Spark's stream-stream join: no state variables, its state is the buffered rows of each input side
# (the statestore source reads one side with the option joinSide, left or right).
JOIN = "symmetricHashJoin"
JOIN_SIDES = ("left", "right")


def describe(spark, checkpoint: str, limit: int = 10, only: list[str] | None = None) -> list[str]:
    """Printable lines: every state variable of every transformWithState operator (or those named
    in `only`, each of which must exist), its row count and its first `limit` rows; and, without
    `only`, the rows each side of a stream-stream join keeps."""
    ops = _operators(spark, checkpoint).sort_values("operatorId", ascending=False)  # the first stage first
    variables = [(op, name, var, batch) for op, name, props, batch in zip(
        ops["operatorId"], ops["operatorName"], ops["operatorProperties"], ops["maxBatchId"])
        for var in declared(props) if not var["name"].startswith("$")]  # $...: Spark's own, not readable
    refuse_unknown(only, {var["name"] for _, _, var, _ in variables}, checkpoint)
    joins = ops[ops["operatorName"] == JOIN].drop_duplicates("operatorId")  # the metadata has a row per store
    lines = []
    for op, batch in [] if only else zip(joins["operatorId"], joins["maxBatchId"]):
        lines.append(f"operator {op} ({JOIN}): a stream-stream join: its state is each side's rows, kept until "
                     f"the watermark and the join's time range drop them (statestore source, option joinSide)")
        for side in JOIN_SIDES:
            _shown(lines, f"operator {op}, {side} side", read(spark, checkpoint, None, int(op), joinSide=side),
                   batch, limit)
    for op, name, var, batch in variables:
        if only and var["name"] not in only:
            continue
        rows = read(spark, checkpoint, var["name"], int(op))
        _shown(lines, f"operator {op} ({name}), {var['name']} ({var['type']})", rows, batch, limit)
    return lines


def _shown(lines: list[str], what: str, rows: pd.DataFrame, batch, limit: int) -> None:
    lines.append(f"{what}: {len(rows)} rows as of batch {batch}")
    if len(rows):
        lines += ["  " + line for line in rows.head(limit).to_string(index=False).splitlines()]
        if len(rows) > limit:
            lines.append(f"  ... {len(rows) - limit} more")
