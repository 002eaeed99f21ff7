"""`joinlab interview pack PATTERN --out DIR`: a candidate's workspace, self-contained, without the
answers (what it holds: docs/interviewing.md). `make check` in it installs the lab and runs the grader.
"""
from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from joinlab.interview import ROOT, Exercise, exercise, prompt_text
from joinlab.interview.live import write_expectation
from joinlab.interview.report import LOG, now

# What of the lab goes into a workspace: packages whole, less what holds or runs a solution. A
# pattern's page (jobs/<module>/README.md) holds the solution below its marker: only its prompt goes.
LAB_PACKAGES = ("joinlab", "jobs", "generators")
LEFT_OUT = ("solution.py", "README.md", "__pycache__", "*.pyc")


def fast_stage(ex: Exercise) -> str:
    """What `make check-fast` runs: processors go through pyspark's in-memory tester; functions of
    Spark's own join through its query, on a local session."""
    return "scenarios only: seconds, no Spark" if ex.processors else "scenarios only: a local Spark session, Java 17"


def makefile(ex: Exercise) -> str:
    grade = (f"$(VENV)/bin/joinlab interview check {ex.pattern} --solution {ex.module}.py --scenarios scenarios "
             f"--expectation expectation.json")
    return f"""# Your workspace for the {ex.pattern} exercise. `make check` grades {ex.module}.py.
PYTHON ?= python3
VENV ?= .venv

.PHONY: check check-fast
check: $(VENV)/.installed ## scenarios in memory, then the real job on Kafka and Spark (needs Java 17)
\t{grade}

check-fast: $(VENV)/.installed ## {fast_stage(ex)}
\t{grade} --fast

$(VENV)/.installed: lab/pyproject.toml
\ttest -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
\t$(VENV)/bin/pip install --quiet --disable-pip-version-check -e lab
\ttouch $@
"""


def readme(ex: Exercise) -> str:
    """The workspace's README. A candidate who writes functions of Spark's own join has no processor,
    so no restart or reordering of one to play: their scenarios run on Spark itself."""
    yours = "your processor" if ex.processors else "your functions"
    what = yours if ex.processors else " and ".join(f"`{name}`" for name in ex.writes)
    fast = ("in seconds: each as sent, with a\n   new processor object before every micro-batch as after a restart, "
            "and with each batch's rows\n   in another order" if ex.processors else "each through the job's real "
            "query on a\n   local Spark session, one micro-batch per batch, a few seconds each")
    return f"""# Stream Join Lab: the {ex.pattern} exercise (level {ex.level}, {ex.time_box})

1. Read `{ex.module}.md`: the data, the topics, what must come out, the questions to think about.
2. Write {what} in `{ex.module}.py` (it {"runs" if ex.processors else "imports"} as it is, and fails the grader).
3. Grade it: `make check-fast` (the scenarios in `scenarios/`, {fast}), then `make check` (also the real job:
   {yours} on Kafka and Spark with out-of-order, duplicated and malformed events, stopped and restarted from its
   checkpoint, compared with the right answer). `interview-log.json` notes when you check.

Needs Python 3.10+ and Java 17 (for Spark{"" if ex.processors else ", in both"}). The first `make` installs the lab
into `.venv`. `lab/` holds what the job is made of: parsing, keying and wiring (`lab/jobs/`), the generators and the
grader; {yours} {"is the one" if ex.processors else "are the"} missing piece. Your interviewer may also run scenarios
you do not see.
"""


def pack(pattern: str, out: Path, archive: bool = False) -> Path:
    ex = exercise(pattern)
    if out.exists():
        shutil.rmtree(out)
    (out / "lab").mkdir(parents=True)
    for package in LAB_PACKAGES:
        shutil.copytree(ROOT / package, out / "lab" / package, ignore=shutil.ignore_patterns(*LEFT_OUT))
    # The lab's pyproject, less the package a workspace has not: the references.
    lab_toml = (ROOT / "pyproject.toml").read_text().replace(', "references*"]', "]")
    (out / "lab" / "pyproject.toml").write_text(lab_toml)
    (out / "lab" / "README.md").write_text("The Stream Join Lab's code, less the solutions (an interview workspace).\n")
    (out / f"{ex.module}.md").write_text(prompt_text(ex.prompt()))
    shutil.copy(ex.stub(), out / f"{ex.module}.py")
    shutil.copytree(ex.scenarios(), out / "scenarios")
    write_expectation(pattern, out / "expectation.json", seed=7, count=1200)
    (out / "Makefile").write_text(makefile(ex))
    (out / "README.md").write_text(readme(ex))
    (out / LOG).write_text(f'{{"packed": "{now()}", "checks": []}}\n')  # each check appends to it
    if archive:
        with tarfile.open(f"{out}.tar.gz", "w:gz") as tar:
            tar.add(out, arcname=out.name)
    return out


def main(args) -> int:
    ex = exercise(args.pattern)
    out = args.out or Path("workspace") / args.pattern
    pack(args.pattern, out, archive=args.archive)
    print(f"Interview workspace for {ex.pattern} (level {ex.level}, {ex.time_box}): {out}/")
    if args.archive:
        print(f"  and the same as one file: {out}.tar.gz")
    print(f"""  1. read   {out}/{ex.module}.md
  2. edit   {out}/{ex.module}.py  ({', '.join(ex.writes)})
  3. grade  make -C {out} check-fast   ({fast_stage(ex)}), then  make -C {out} check   (the real job)
     or, in this lab:  make interview-check PATTERN={ex.pattern}
The interviewer grades what comes back with the held-back scenarios too:
  joinlab interview check {ex.pattern} --solution their_file.py --hidden exercises/hidden""")
    return 0
