"""Each spec page's "One record's trip" is what its pattern does: its input records played through
the pattern's in-memory chain (the key and what each stage keeps, batch by batch) and through the
real query on Spark (the records it writes) give the page's block line for line."""
import re
from pathlib import Path

import pytest

from joinlab import patterns
from tests import traces

ROOT = Path(__file__).resolve().parents[1]


def shown_on_page(pattern: str) -> str:
    page = (ROOT / "jobs" / patterns.module_name(pattern) / "README.md").read_text()
    found = re.search(rf"<!-- the trip of {pattern}: .*?-->\n```\n(.*?)```", page, re.S)
    assert found, f"jobs/{patterns.module_name(pattern)}/README.md has no trip of {pattern}"
    return found.group(1)


@pytest.mark.parametrize("pattern", list(patterns.PATTERNS))
def test_the_record_s_trip_on_the_spec_page_is_what_the_pattern_does(spark, pattern):
    assert pattern in traces.TRIPS, f"{pattern} has no trip in tests/traces.py"
    assert shown_on_page(pattern) == traces.trace(spark, pattern), (
        f"the spec page's trip of {pattern} is not what the pattern does: print it with "
        f"`.venv/bin/python -m tests.traces {pattern}` and put it on the page")

