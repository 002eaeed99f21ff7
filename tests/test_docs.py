"""The pages say what the code does: each pattern page's "State" section names exactly the state
variables its processors declare, and every relative link in the README, docs/ and the pattern
pages points to a file that exists. Pure: no Spark, no broker."""
import re
from pathlib import Path

import pytest

from joinlab import patterns

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = [patterns.module_name(p) for p in patterns.PATTERNS]
# a state variable's name where the code declares it: handle.getValueState("name", ...) and the
# like, or the shared helper KeyState(handle, "name", ...)
DECLARED = re.compile(r"""\b(?:get(?:Value|Map|List)State\(|KeyState\(\s*\w+,)\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def page(module: str) -> Path:
    return ROOT / "jobs" / module / "README.md"


def sources(module: str) -> list[Path]:
    """The pattern's code under jobs/: jobs/<module>*.py, or the folder jobs/<module>/*.py."""
    return sorted({*ROOT.joinpath("jobs").glob(f"{module}*.py"), *ROOT.joinpath("jobs", module).glob("*.py")})


def declared_state(module: str) -> set[str]:
    return {name for path in sources(module) for name in DECLARED.findall(path.read_text())}


def section(text: str, title: str) -> str:
    """The body of the section `## <title>`, up to the next heading of level 1 or 2."""
    lines = text.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
    return "\n".join(lines[start + 1:end])


def code_spans(text: str) -> set[str]:
    return set(re.findall(r"`([^`\n]+)`", text))


def spark_join(module: str) -> bool:
    """A pattern whose query has no transformWithState stage: its state is Spark's own join's."""
    import importlib
    return not importlib.import_module(f"jobs.{module}.parts").STAGES


@pytest.mark.parametrize("module", PATTERNS)
def test_the_state_section_names_exactly_the_state_variables_the_processors_declare(module):
    declared = declared_state(module)
    if spark_join(module):  # no variables to name: the section says what the join keeps and how to read it
        section_text = section(page(module).read_text(), "State")
        assert not declared and "joinSide" in section_text and "numRowsTotal" in section_text
        return
    assert declared, f"no getValueState/getMapState/getListState(\"name\", ...) in {sources(module)}"
    text = page(module).read_text()
    named = code_spans(section(text, "State"))
    assert named == declared, (f"{page(module).relative_to(ROOT)}, ## State: names {sorted(named - declared)} "
                               f"that no processor declares, and leaves out {sorted(declared - named)}")


@pytest.mark.parametrize("module", PATTERNS)
def test_the_state_section_is_below_the_solution_marker(module):
    from joinlab.interview import MARKER
    lines = page(module).read_text().splitlines()
    assert lines.count(MARKER) == 1 and lines.index("## State") > lines.index(MARKER), (
        "the solution's state layout must not be in the candidate's prompt")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(ROOT.joinpath("docs").glob("*.md")), *map(page, PATTERNS)]


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold no links
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)]


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file_that_exists(path):
    missing = [target for target in relative_links(path)
               if not (path.parent / target.split("#")[0]).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_the_readme_table_answers_a_newcomer_s_questions():
    """Where the lottery's no-coupon rule is, and what money enrichment groups by, from the table alone."""
    rows = {line.split("|")[1].strip(): line for line in (ROOT / "README.md").read_text().splitlines()
            if line.startswith("| ") and "(level" in line}
    lottery = rows["lottery (level 3)"]
    assert "[`Coupons`](jobs/lottery/solution.py)" in lottery and "without a coupon is rejected" in lottery
    money = rows["money enrichment (level 4)"]
    assert "1: `session_id`" in money and "2: `user_id`" in money


@pytest.mark.parametrize("module", PATTERNS)
def test_the_notebook_reads_only_state_its_processors_declare(module):
    import json
    notebook = json.loads((ROOT / "notebooks" / f"{module}.ipynb").read_text())
    code = "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")
    read = set(re.findall(r"""\bstate\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""", code))
    if spark_join(module):  # the join's state: each side's rows, read by side
        sides = set(re.findall(r"""\bstate\(\s*side=["'](left|right)["']""", code))
        assert not read and sides == {"left", "right"}, f"notebooks/{module}.ipynb reads {sorted(read)}, sides {sides}"
        return
    assert read, f"notebooks/{module}.ipynb reads no state by name"
    assert read <= declared_state(module), f"notebooks/{module}.ipynb reads {sorted(read - declared_state(module))}"


def test_the_readme_excerpt_of_a_processor_is_the_code():
    """The README shows a processor's code: it must be the code, line for line."""
    readme = (ROOT / "README.md").read_text()
    excerpt = re.search(r"from \[jobs/car_pollution/solution\.py\].*?```python\n(.*?)```", readme, re.S).group(1)
    assert excerpt in (ROOT / "jobs" / "car_pollution" / "solution.py").read_text()


def test_every_excerpt_a_page_marks_as_one_is_the_code():
    """A block marked `<!-- not-run: an excerpt of FILE ... -->` shows FILE's code: line for line."""
    marked = re.compile(r"<!-- not-run: an excerpt of (\S+).*?-->\n```python\n(.*?)```", re.S)
    found = 0
    for path in pages():
        for file, excerpt in marked.findall(path.read_text()):
            found += 1
            assert excerpt in (ROOT / file).read_text(), f"{path.relative_to(ROOT)}: its excerpt of {file} is not the code"
    assert found >= 2  # the README's processor, ad clicks' two functions
