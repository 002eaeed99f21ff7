"""The CLI's own wiring: pass-through help, and errors that say what to do."""
import subprocess
import sys


def joinlab(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "joinlab", *args], capture_output=True, text=True, timeout=60,
                          **kwargs)


def test_bench_and_generate_hand_their_help_to_their_own_parsers():
    bench = joinlab("bench", "--help")
    assert bench.returncode == 0 and "--latency-rate" in bench.stdout
    generate = joinlab("generate", "tweet-views", "--help")
    assert generate.returncode == 0 and "--tweets-first" in generate.stdout


def test_an_unknown_pattern_lists_the_known_ones():
    done = joinlab("demo", "no-such-pattern")
    assert done.returncode == 2 and "tweet-views" in done.stderr
