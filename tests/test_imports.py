"""Imports run one way: `jobs/` uses `joinlab/`, never the reverse, and no module imports itself
back through others, at import time or inside a function (where an import would only hide the
cycle: a reader still goes round it)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("joinlab", "jobs")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, *, top_level_only: bool) -> set[str]:
    """The lab's modules `path` imports, at import time only or anywhere in it."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in names if name.split(".")[0] in PACKAGES}


def lab_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")}


def test_joinlab_never_imports_jobs():
    offenders = {name: sorted(n for n in imported(path, top_level_only=False) if n.split(".")[0] == "jobs")
                 for name, path in lab_modules().items() if name.split(".")[0] == "joinlab"}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_import_cycle():
    modules = lab_modules()
    graph = {name: {n for n in imported(path, top_level_only=False) if n in modules and n != name}
             for name, path in modules.items()}

    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    return trail + [start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, trail + [nxt]))
        return None

    cycles = [cycle for name in sorted(graph) if (cycle := cycle_from(name))]
    assert cycles == [], " -> ".join(cycles[0])


def test_a_processor_s_module_imports_no_more_than_the_processor_needs():
    """Spark's Python workers import a processor's module, and with it its package, in every
    worker that runs a task of the query: the registry (whose entry points scan every installed
    distribution), a pattern's query or its parts would cost each of them about 90 ms more
    (docs/benchmarks.md, issue 50)."""
    import subprocess
    import sys
    from joinlab import patterns
    modules = sorted({f"jobs.{patterns.module_name(p)}.{part}" for p in patterns.PATTERNS for part in ("solution", "given")})
    code = ("import sys; " + "; ".join(f"import {m}" for m in modules) +
            "; print(sorted(m for m in sys.modules if m == 'joinlab.patterns' or m.startswith('jobs.') and "
            "m.rpartition('.')[2] in ('job', 'parts', 'consumer', 'in_memory')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", f"importing the processors' modules loads {loaded.strip()}"
