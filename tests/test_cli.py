"""The CLI's own wiring: help for every subcommand, pass-through help, and errors that say what to do."""
import argparse
import subprocess
import sys

import pytest

from joinlab import cli


def joinlab(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "joinlab", *args], capture_output=True, text=True, timeout=60,
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
    generate = joinlab("generate", "tweet-views", "--help")
    assert generate.returncode == 0 and "--tweets-first" in generate.stdout


def test_an_unknown_pattern_lists_the_known_ones():
    done = joinlab("demo", "no-such-pattern")
    assert done.returncode == 2 and "tweet-views" in done.stderr
