"""The CLI's own wiring: help for every subcommand, pass-through help, and errors that say what to do."""
import argparse
import subprocess
import sys

import pytest

from joinlab import cli
from tests.conftest import checkpoint_declaring


def joinlab(*args, timeout: float = 60, **kwargs):
    return subprocess.run([sys.executable, "-m", "joinlab", *args], capture_output=True, text=True, timeout=timeout,
                          **kwargs)


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command line that names a (sub)command of `parser`, nested ones too; for a command that
    hands the rest of its line to a pattern's own parser (generate, compare), also each pattern."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, (*path, name))
    positionals = [a for a in parser._actions if not a.option_strings]
    if positionals and positionals[-1].nargs == argparse.REMAINDER:
        found += [(*path, choice) for choice in positionals[0].choices]
    return found


@pytest.mark.parametrize("command", commands(cli.parser()), ids=lambda c: " ".join(c) or "joinlab")
def test_every_command_prints_its_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([*command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code in (0, None) and "usage:" in out, f"joinlab {' '.join(command)} --help: {out}"


def test_compare_and_generate_hand_their_help_to_their_own_parsers():
    compare = joinlab("compare", "car-pollution", "--help")
    assert compare.returncode == 0 and "usage" in compare.stdout
    compare = joinlab("compare", "tweet-views", "--help")
    assert compare.returncode == 0 and "--watermark" in compare.stdout
    generate = joinlab("generate", "tweet-views", "--help")
    assert generate.returncode == 0 and "--tweets-first" in generate.stdout


def test_an_unknown_pattern_lists_the_known_ones():
    done = joinlab("demo", "no-such-pattern")
    assert done.returncode == 2 and "tweet-views" in done.stderr


def test_state_refuses_a_var_the_checkpoint_does_not_hold_and_names_those_it_does(tmp_path, monkeypatch, capsys):
    import joinlab.spark
    monkeypatch.setattr(joinlab.spark, "session", lambda *a, **k: pytest.fail("Spark started for a wrong --var"))
    checkpoint = checkpoint_declaring(tmp_path, ["users", "txs"], ["joining", "$procTimers_keyToTimestamp"])
    assert cli.main(["state", "money-enrichment", "--checkpoint", checkpoint,
                     "--var", "joining", "--var", "waiting"]) == 2
    err = capsys.readouterr().err
    assert "no state variable named waiting" in err and "it holds: joining, txs, users" in err


def test_describe_refuses_a_var_no_operator_declares_before_reading_any(monkeypatch):
    import json

    import pandas as pd

    from joinlab import checkpoint_state as state
    props = [json.dumps({"stateVariables": [{"stateName": n, "stateVariableType": "ValueState"} for n in names]})
             for names in (["users", "txs"], ["joining"])]
    operators = pd.DataFrame({"operatorId": [0, 1], "operatorName": ["tws", "tws"], "operatorProperties": props,
                              "maxBatchId": [4, 4]})
    monkeypatch.setattr(state, "_operators", lambda spark, checkpoint: operators)
    monkeypatch.setattr(state, "read", lambda *a, **k: pytest.fail("read state before refusing a wrong name"))
    with pytest.raises(ValueError, match="named waiting in cp; it holds: joining, txs, users"):
        state.describe(None, "cp", only=["joining", "waiting"])
    monkeypatch.setattr(state, "read", lambda spark, checkpoint, var, op: pd.DataFrame({"key": [var]}))
    shown = state.describe(None, "cp", only=["joining"])
    assert shown[0] == "operator 1 (tws), joining (ValueState): 1 rows as of batch 4" and len(shown) == 3


def test_describe_prints_each_side_of_a_stream_stream_join(monkeypatch):
    """A stream-stream join declares no state variables: its state is each side's rows, which the
    statestore source reads with the option joinSide. The metadata lists the join once per store."""
    import pandas as pd

    from joinlab import checkpoint_state as state
    stores = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]
    operators = pd.DataFrame({"operatorId": [0] * 4, "operatorName": [state.JOIN] * 4, "stateStoreName": stores,
                              "operatorProperties": [None] * 4, "maxBatchId": [7] * 4})
    monkeypatch.setattr(state, "_operators", lambda spark, checkpoint: operators)
    read = []

    def side_rows(spark, checkpoint, var, op, **options):
        read.append((var, op, options))
        return pd.DataFrame({"key": list(range({"left": 3, "right": 1}[options["joinSide"]]))})
    monkeypatch.setattr(state, "read", side_rows)
    shown = state.describe(None, "cp", limit=2)
    assert read == [(None, 0, {"joinSide": "left"}), (None, 0, {"joinSide": "right"})]
    assert shown[0].startswith("operator 0 (symmetricHashJoin): a stream-stream join")
    assert "operator 0, left side: 3 rows as of batch 7" in shown and "  ... 1 more" in shown
    assert "operator 0, right side: 1 rows as of batch 7" in shown


def test_demo_of_several_patterns_runs_them_on_one_broker_and_one_spark_session(tmp_path):
    """`joinlab demo A B` (and `all`): each pattern verified against its reference, and Spark (like
    the broker) started once for all of them: the second pattern starts on a warm JVM."""
    import os
    from joinlab.jars import cache
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    done = joinlab("demo", "tweet-views", "car-pollution", "--count", "300", timeout=900,
                   env={**env, "LAB_HOME": str(tmp_path), "LAB_JARS": str(cache())})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 of 2 patterns verified" in done.stdout
    assert done.stderr.count("starting Spark") == 1 and done.stderr.count("broker at") == 1, done.stderr
