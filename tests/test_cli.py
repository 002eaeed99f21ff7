"""The CLI's own wiring: pass-through help, and errors that say what to do."""
import subprocess
import sys


def joinlab(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "joinlab", *args], capture_output=True, text=True, timeout=60,
                          **kwargs)


def test_compare_and_generate_hand_their_help_to_their_own_parsers():
    compare = joinlab("compare", "car-pollution", "--help")
    assert compare.returncode == 0 and "usage" in compare.stdout
    generate = joinlab("generate", "tweet-views", "--help")
    assert generate.returncode == 0 and "--tweets-first" in generate.stdout


def test_an_unknown_pattern_lists_the_known_ones():
    done = joinlab("demo", "no-such-pattern")
    assert done.returncode == 2 and "tweet-views" in done.stderr
