"""Every registered pattern fulfils the contract (joinlab.patterns.Job and Reference) and has all
its parts: what docs/adding-a-pattern.md tells a pattern's author to write. Pure: no Spark session,
no broker; the parts' own tests run them."""
import ast
import json
import re
from pathlib import Path

import pytest

from joinlab import patterns
from joinlab.kit import solutions
from joinlab.kit import in_memory
from joinlab.interview import exercise, prompt_text
from joinlab.kit.stages import Stage, processors

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = list(patterns.PATTERNS)


def parts(pattern: str) -> dict[str, Path]:
    """The files a pattern needs besides its modules, by what they are."""
    m = patterns.module_name(pattern)
    return {"spec page": ROOT / "jobs" / m / "README.md", "row contract": ROOT / "jobs" / m / "given.py",
            "exercise stub": ROOT / "exercises" / f"{m}.py", "notebook": ROOT / "notebooks" / f"{m}.ipynb",
            "interview notebook": ROOT / "notebooks" / f"interview_{m}.ipynb",
            "integration tests": ROOT / "tests" / f"test_{m}.py", "unit tests": ROOT / "tests" / f"test_{m}_unit.py"}


def missing(module, protocol) -> list[str]:
    """The names of `protocol` (its annotated attributes and its methods) that `module` lacks."""
    names = [*vars(protocol).get("__annotations__", {}), *(n for n, v in vars(protocol).items()
                                                          if callable(v) and not n.startswith("_"))]
    return [name for name in names if not hasattr(module, name)]


def test_the_registry_holds_the_patterns_simplest_first():
    four = ["tweet-views", "car-pollution", "lottery", "money-enrichment"]
    assert [p for p in PATTERNS if p in four] == four  # a new pattern goes in its place among them


def test_no_two_patterns_share_a_topic_or_a_setting():
    for what, names in [("topics", [t for p in PATTERNS for t in patterns.all_topics(p)]),
                        ("settings", [n for p in PATTERNS for n in patterns.job(p).SETTINGS])]:
        assert len(names) == len(set(names)), f"{what}: {sorted(n for n in set(names) if names.count(n) > 1)}"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_job_module_fulfils_the_contract(pattern):
    job = patterns.job(pattern)
    assert isinstance(job, patterns.Job), f"{pattern}'s job module has no {missing(job, patterns.Job)}"
    assert job.DEAD_LETTERS_TOPIC in job.OUTPUT_TOPICS and not set(job.INPUT_TOPICS) & set(job.OUTPUT_TOPICS)
    assert all(isinstance(s, Stage) for s in job.STAGES)  # none for a query without transformWithState
    assert len({s.name for s in job.STAGES}) == len(job.STAGES), "stage names are attributes of InMemory: unique"
    assert set(processors(job.STAGES)) <= set(job.PROCESSORS) and job.PROCESSORS, "a candidate writes something"
    named = [s.processor for s in job.STAGES if isinstance(s.processor, str)]
    assert all(path.rpartition(".")[0] == job.SOLUTION for path in named), f"{named}: not in {job.SOLUTION}"
    solutions.of(job.SOLUTION, job.PROCESSORS)  # the lab's solution defines every processor
    assert isinstance(job.INTERVIEW, patterns.Interview) and isinstance(job.SETTINGS, tuple)
    assert job.LOOKUP is None or job.LOOKUP.schema.topic in job.INPUT_TOPICS


@pytest.mark.parametrize("pattern", PATTERNS)
def test_its_in_memory_chain_is_its_stages(pattern):
    job = patterns.job(pattern)
    assert issubclass(job.InMemory, in_memory.Chain)
    pipeline = job.InMemory()
    assert [type(getattr(pipeline, s.name)) for s in job.STAGES] == [in_memory.Tester] * len(job.STAGES)
    assert pipeline.stages == job.STAGES  # one declaration: the in-memory chain runs the query's stages
    assert pipeline.views(pipeline.run([pipeline.rows([])])) == {}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_its_generator_and_reference_are_there(pattern):
    generator = patterns.generator(pattern)
    assert callable(generator.generate) and callable(generator.main)
    reference = patterns.reference(pattern)
    assert isinstance(reference, patterns.Reference), f"its reference has no {missing(reference, patterns.Reference)}"
    assert reference.expected([]) == {} and reference.final_watermark_ms([]) is None


@pytest.mark.parametrize("pattern", PATTERNS)
def test_its_files_are_there(pattern):
    missing = [what for what, path in parts(pattern).items() if not path.is_file()]
    assert not missing, f"{pattern} has no {', '.join(missing)}"
    prompt_text(parts(pattern)["spec page"])  # the solution marker, exactly once


@pytest.mark.parametrize("pattern", PATTERNS)
def test_its_exercise_has_a_stub_and_scenarios(pattern):
    ex = exercise(pattern)
    stub = ex.stub().read_text()
    assert all(re.search(rf"^(class|def) {name}\b|^{name} = ", stub, re.M) for name in ex.writes), ex.writes
    for directory in (ex.scenarios(), ex.hidden()):
        scenarios = sorted(directory.glob("*.json"))
        assert scenarios, f"no scenarios in {directory}"
        assert all({"name", "says", "batches", "expect"} <= json.loads(s.read_text()).keys() for s in scenarios)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_stacks_run_its_generator(pattern):
    compose = (ROOT / "docker-compose.yml").read_text()
    assert f"  gen-{pattern}:\n" in compose, f"docker-compose.yml has no gen-{pattern} service"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_job_module_reads_top_down(pattern):
    """Nothing in jobs/<pattern>/job.py is used above the line that defines it (in a function's
    body too): the file reads in the order the data flows, as docs/architecture.md walks it."""
    path = ROOT / "jobs" / patterns.module_name(pattern) / "job.py"
    tree = ast.parse(path.read_text())
    defined = {}
    for node in tree.body:
        names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                 [t.id for target in getattr(node, "targets", [getattr(node, "target", None)]) if target
                  for t in ast.walk(target) if isinstance(t, ast.Name)])
        for name in names:
            defined.setdefault(name, node.lineno)
    early = sorted({(n.id, n.lineno, defined[n.id]) for n in ast.walk(tree)
                    if isinstance(n, ast.Name) and n.id in defined and n.lineno < defined[n.id]})
    assert not early, f"{path.relative_to(ROOT)}: used before defined (name, used at, defined at): {early}"
