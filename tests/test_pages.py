"""Every command and code block on the lab's pages works as the page shows it (issue 34).

Sybil (a maintained documentation-testing library: Markdown fenced blocks, HTML-comment
directives, Python blocks run in a namespace per page) finds the examples; this file says how each
kind is checked. A page's examples run in page order, one test each, named `page:line`.

- ```bash blocks, line by line, and inline `make ...` / `joinlab ...` spans in the prose:
  - `make TARGET VAR=...`: `make -n` must accept it (the target exists, the options are make's),
    and every `joinlab` command its recipe runs is checked as below. Nothing of make runs for real.
    The candidate's prompts (exercises/*.py, a pattern page above its solution marker, and prose
    about "the workspace") are read in a packed workspace: their `make` is that Makefile's.
  - `joinlab ...`: parsed by joinlab's own argparse parser, so a subcommand, a flag or a pattern
    name that does not exist fails; `--var NAME` must be a state variable the pattern's processors
    declare. The cheap ones then run for real against the session's broker: every `--help`,
    `topics list` and `tail` (not `--follow`), `lab ps`, `interview scenarios`, `interview pack`
    (into a temporary folder), `interview check --fast` (its `# PASS` / `# FAIL: "..."` comment is
    checked), and `generate` for 1 second of its `--duration` at the page's rate. The rest starts
    Spark or runs until stopped (`run`, `verify`, `demo`, `state`, `compare`, `lab up`): parsed only.
  - `VAR=value` before a command: the variable is one docs/configuration.md lists.
  - `.venv/bin/python -m M`, `.venv/bin/pytest PATHS`, `.venv/bin/jupyter SUB PATHS`: the module,
    the files, the Jupyter subcommand exist; `jupyter nbconvert` runs on a copy of the notebooks.
  Inline spans may name a placeholder (PATTERN, FILE, DIR), alternatives (`run|demo`) and optional
  flags (`[--fast]`), and leave out required arguments; fenced commands are whole.
- ```python blocks run in the page's namespace: a pattern page's with its job module's names, the
  session's Spark and `raw` (a Kafka source of the pattern's topics on the session's broker) and
  `events` (the parsed events). The frame a pattern page's snippet builds must have the schema of
  the job's own; docs/state-evolution.md's class must override only what its base defines.
- Blocks without a language are output, not commands. A block in another language fails: teach
  this file to check it, or mark it.
- `<!-- not-run: REASON -->` on the line before a block (or an inline span) marks it not run, with
  its reason on the page. It is no skipped test: the marker's own example checks the reason is
  given and that something follows it.

docs/workshop.md is checked here too, as every page is: its commands parse, its `--var` names
exist, its `make` targets pass `make -n`, in a second. The workshop rehearsal (TestTheWorkshop in
tests/test_lab_stack.py) runs them on the native stack and checks the outputs the page shows.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sybil import Document, Region, Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.example import NotEvaluated
from sybil.parsers.markdown import CodeBlockParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer

from tests.test_docs import declared_state

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT: dict[str, str] = {}  # page -> why it is not checked here (none now)
PAGES = [p for p in [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")), *sorted(ROOT.glob("jobs/*/README.md")),
                     ROOT / "notebooks" / "README.md", *sorted(ROOT.glob("exercises/*.py"))]
         if str(p.relative_to(ROOT)) not in LEFT_OUT]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
VENV_BIN = Path(sys.executable).parent


# --- not run, with its reason --------------------------------------------------------------------

class NotRun:
    """`<!-- not-run: REASON -->`: the example right after it on the page is not run. The marker's
    own example passes when it gives a reason and has an example after it. Decided from the page
    alone (no state between examples), so a test selected by itself behaves the same."""

    def __call__(self, example):
        regions = [region for _, region in example.document.regions]
        if example.region.evaluator is self:
            assert example.parsed.strip(), (
                f"{example.path}:{example.line}: a not-run marker needs its reason beside it")
            assert regions[-1] is not example.region, (
                f"{example.path}:{example.line}: a not-run marker with nothing after it")
            return None
        before = regions.index(example.region) - 1
        if before >= 0 and regions[before].evaluator is self and regions[before].parsed.strip():
            return None  # not run: its reason is on the page
        raise NotEvaluated()  # the example's own evaluator checks it


NOT_RUN = NotRun()


def outside_fences(document: Document) -> Document:
    """The page with its fenced blocks blanked (same offsets): a marker shown in a block is text."""
    blanked = re.sub(r"^```.*?^```", lambda m: re.sub(r"[^\n]", " ", m.group()), document.text, flags=re.S | re.M)
    return Document(blanked, document.path)


def not_run_parser(document: Document):
    document.push_evaluator(NOT_RUN)  # asked first for every example of the page
    for region in DirectiveInHTMLCommentLexer(directive="not-run", arguments=".*?")(outside_fences(document)):
        yield Region(region.start, region.end, region.lexemes["arguments"], NOT_RUN)


# --- commands: fenced bash blocks and inline spans -----------------------------------------------

def commands_of(text: str) -> list[tuple[list[str], str]]:
    """(words, trailing comment) per command line of a shell block; a trailing `&` dropped."""
    found = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():  # a line ending in \ goes on on the next
        words = shlex.split(line, comments=True)
        if words and words[-1] == "&":
            words.pop()
        if words:
            comment = re.search(r"\s#\s*(.*)$", line)
            found.append((words, comment.group(1) if comment else ""))
    return found


def workspace_reading(document: Document, position: int, inline: bool) -> str:
    """Whose Makefile a `make` at `position` means. "workspace": an exercise stub or a pattern page
    above its solution marker (the candidate's prompt, read in a packed workspace). "either": an
    inline mention in a paragraph about the workspace (the lab's Makefile, else the workspace's).
    "lab": everything else."""
    from joinlab.interview import MARKER
    path = Path(document.path)
    if path.parent.name == "exercises":
        return "workspace"
    if path.name == "README.md" and path.parent.parent.name == "jobs" and position < document.text.find(MARKER):
        return "workspace"
    start = document.text.rfind("\n\n", 0, position)
    end = document.text.find("\n\n", position)
    return "either" if inline and "workspace" in document.text[start:end if end >= 0 else None] else "lab"


class Checks:
    """What a command on a page must do. `whole`: a fenced command, complete and (if cheap) run;
    else an inline mention, checked but not run."""

    def __init__(self, context, example, whole: bool):
        self.context, self.whole = context, whole
        self.where = f"{os.path.relpath(example.path, ROOT)}:{example.line}"

    def fail(self, words, why: str):
        pytest.fail(f"{self.where}: `{' '.join(words)}`: {why}", pytrace=False)

    def command(self, words: list[str], comment: str = "", makefile: str = "lab") -> None:
        env = {}
        while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        program = words[0].split("/")[-1]
        if program == "docker":
            return self.docker(words, env)
        for name in env:
            if f"`{name}`" not in CONFIGURATION and not (program == "make" and self.makefile_variable(name)):
                self.fail(words, f"{name} is not a setting docs/configuration.md lists")
        if program == "make":
            return self.make(words[1:], env, makefile)
        if program == "joinlab":
            return self.joinlab(words[1:], comment)
        if words[0] == ".venv/bin/python" and words[1:2] == ["-m"]:
            if importlib.util.find_spec(words[2]) is None:
                self.fail(words, f"no module {words[2]}")
            return None
        if program == "pytest":
            missing = [w for w in words[1:] if not w.startswith("-") and not (ROOT / w.split("::")[0]).exists()]
            if missing:
                self.fail(words, f"no such test files: {missing}")
            return None
        if program == "jupyter":
            return self.jupyter(words)
        self.fail(words, "a command test_pages.py does not know how to check: teach it, or mark the block "
                         "`<!-- not-run: REASON -->`")

    def docker(self, words: list[str], env: dict) -> None:
        """`docker compose -f FILE ...`: the files exist and read the variables set before it. (No
        engine here: test_compose.py and `make compose-test` run the stack itself.)"""
        files = [words[i + 1] for i, w in enumerate(words) if w == "-f"]
        missing = [f for f in files if not (ROOT / f).exists()]
        if words[1:2] != ["compose"] or missing:
            self.fail(words, f"not a `docker compose` of the lab's files (missing: {missing})")
        text = "".join((ROOT / f).read_text() for f in files)
        unread = [name for name in env if "${" + name not in text]
        if unread:
            self.fail(words, f"no compose file given reads {unread}")

    def makefile_variable(self, name: str) -> bool:
        return re.search(rf"\$\({name}\)", (ROOT / "Makefile").read_text()) is not None

    def make(self, args: list[str], env: dict, makefile: str) -> None:
        variables = [a for a in args if "=" in a]
        for assignment in variables:
            name = assignment.split("=")[0]
            if not self.makefile_variable(name) and f"`{name}`" not in CONFIGURATION:
                self.fail(["make", *args], f"the Makefile reads no variable {name}")
        places = {"lab": [ROOT], "workspace": [], "either": [ROOT]}[makefile]
        if makefile != "lab":
            places.append(self.context.workspace_makefile())
        names = {ROOT: "the lab's"}
        for cwd in places:
            done = subprocess.run(["make", "-n", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, **env, "MAKEFLAGS": ""})
            if done.returncode == 0:
                break
        else:
            self.fail(["make", *args], f"`make -n` with {' or '.join(names.get(p, 'a workspace') for p in places)} "
                                       f"Makefile fails: {done.stderr.strip()[-500:]}")
        # the joinlab commands the recipe runs (the printed recipe, `$(LAB) ...` expanded)
        for line in done.stdout.splitlines():
            for call in re.findall(r"\.venv/bin/joinlab ([^;&|]*)", line):
                self.joinlab(shlex.split(call), "", run=False)

    def jupyter(self, words: list[str]) -> None:
        sub = words[1]
        if not (VENV_BIN / f"jupyter-{sub}").exists():
            self.fail(words, f"no `jupyter {sub}` in the venv")
        paths = [w for w in words[2:] if not w.startswith("-")]
        missing = [p for p in paths if not list(ROOT.glob(p.rstrip("/")))]
        if missing:
            self.fail(words, f"no such files: {missing}")
        if sub == "nbconvert" and self.whole:  # on a copy: the page's command rewrites the notebooks
            copy = self.context.tmp / "notebooks-copy"
            shutil.copytree(ROOT / "notebooks", copy / "notebooks")
            done = subprocess.run(" ".join(shlex.quote(w) if "*" not in w else w
                                           for w in [str(VENV_BIN / "jupyter"), *words[1:]]),
                                  shell=True, cwd=copy, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{self.where}: {done.stderr[-1000:]}"

    def joinlab(self, args: list[str], comment: str, run: bool = True) -> None:
        from joinlab import cli
        parsed = self.parse(cli.parser(), args)
        if parsed is None:
            return None
        command = getattr(parsed, "command", None)
        if command == "state":
            held = declared_state(parsed.pattern.replace("-", "_"))
            unknown = [v for v in parsed.var or [] if v not in held]
            if unknown:
                self.fail(["joinlab", *args], f"{parsed.pattern} declares no state variable {unknown}; "
                                              f"its processors declare {sorted(held)}")
        if command in ("generate", "compare"):
            self.pattern_flags(parsed, args)
        if "--help" in args or "-h" in args:
            return self.run_joinlab(args, expect_ok=True, contains="usage:")
        if not (run and self.whole):
            return None
        if command == "topics" and (parsed.action == "list" or parsed.action == "tail" and not parsed.follow):
            self.context.topics_of_every_pattern()
            return self.run_joinlab(args, expect_ok=True)
        if command == "lab" and parsed.action == "ps":
            return self.run_joinlab(args, expect_ok=True)
        if command == "interview" and parsed.action == "scenarios" and not parsed.refresh:
            return self.run_joinlab(args, expect_ok=True, contains=":")
        if command == "interview" and parsed.action == "pack":
            out = self.context.tmp / "packed" / parsed.pattern
            rewritten = list(args)
            if parsed.out is not None:
                rewritten[rewritten.index("--out") + 1] = str(out)
            else:
                rewritten += ["--out", str(out)]
            self.run_joinlab(rewritten, expect_ok=True)
            assert (out / "Makefile").exists() and (not parsed.archive or out.with_suffix(".tar.gz").exists())
            return None
        if command == "interview" and parsed.action == "check" and parsed.fast:
            verdict = re.match(r"(PASS|FAIL)(?::\s*\"([^\"]+)\")?", comment)
            assert verdict, f"{self.where}: say beside a graded check what it gives: # PASS or # FAIL: \"...\""
            output = self.run_joinlab(args, expect_ok=verdict.group(1) == "PASS")
            if verdict.group(2):
                assert verdict.group(2) in output, (
                    f"{self.where}: the grader did not say {verdict.group(2)!r}:\n{output}")
            return None
        if command == "generate":
            shorter = list(args)
            if "--duration" in shorter:
                shorter[shorter.index("--duration") + 1] = "1"  # the page's rate for 1 s, not its minutes
            self.run_joinlab([*shorter, "--no-progress", "--bootstrap", self.context.bootstrap()], expect_ok=True,
                             contains="sent")
        return None

    def parse(self, parser, args):
        """The parsed arguments, or None where an inline span leaves out required arguments."""
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                if "--help" in args or "-h" in args:  # argparse prints and exits at --help: parse without it
                    args = [a for a in args if a not in ("--help", "-h")]
                parsed, extra = parser.parse_known_args(args)
        except SystemExit:
            message = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "?"
            if not self.whole and "arguments are required" in message:
                return None  # an inline mention, e.g. `joinlab state`: the subcommand exists
            self.fail(["joinlab", *args], message)
        allowed = parsed.command == "lab" and getattr(parsed, "action", None) == "generate"
        if extra and not allowed:
            self.fail(["joinlab", *args], f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def pattern_flags(self, parsed, args) -> None:
        """`generate` and `compare` hand their flags to the pattern's own parser: --help lists them."""
        flags = [a.split("=")[0] for a in parsed.rest if a.startswith("--") and a not in ("--help",)]
        if not flags:
            return
        usage = self.run_joinlab([parsed.command, parsed.pattern, "--help"], expect_ok=True)
        unknown = [f for f in flags if not re.search(rf"{re.escape(f)}\b", usage)]
        if unknown:
            self.fail(["joinlab", *args], f"`joinlab {parsed.command} {parsed.pattern}` has no {unknown}")

    def run_joinlab(self, args: list[str], expect_ok: bool, contains: str = "") -> str:
        """Run `joinlab ARGS` in this process (its Spark, if any, is the session's) against the
        session's broker, in the tests' LAB_HOME; its output."""
        from joinlab import cli
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), self.context.environment():
            try:
                code = cli.main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        text = out.getvalue()
        assert (code == 0) == expect_ok, (f"{self.where}: `joinlab {' '.join(args)}` exited {code}, the page "
                                          f"says it {'works' if expect_ok else 'fails'}:\n{text[-2000:]}")
        assert contains in text, f"{self.where}: `joinlab {' '.join(args)}` printed no {contains!r}:\n{text[-2000:]}"
        return text


def shell_block(example):
    for words, comment in commands_of(example.parsed):
        Checks(example.namespace["context"], example, whole=True).command(
            words, comment, workspace_reading(example.document, example.start, inline=False))


INLINE = re.compile(r"(?<![`\w])`((?:[A-Z][A-Z0-9_]*=\S+ )*(?:\.venv/bin/)?(?:make|joinlab)(?: [^`\n]*)?)`(?!`)")


def alternatives(span: str) -> list[list[str]]:
    """An inline mention as whole commands: `a|b` either word, `[--x]` with it, placeholders filled."""
    words = shlex.split(span.replace("[", "").replace("]", ""))
    fill = {"PATTERN": "tweet-views", "DIR": "/tmp/page-dir", "FILE": "exercises/tweet_views.py",
            "THIS_FILE": "exercises/tweet_views.py"}
    choices = [w.split("|") if "|" in w and not w.startswith("-") and "=" not in w else [fill.get(w, w)]
               for w in words]
    commands = [[]]
    for options in choices:
        commands = [c + [o] for c in commands for o in options]
    return commands


def inline_span(example):
    for words in alternatives(example.parsed):
        Checks(example.namespace["context"], example, whole=False).command(
            words, "", workspace_reading(example.document, example.start, inline=True))


def inline_parser(document: Document):
    """Inline `make ...` and `joinlab ...` spans in prose (fenced blocks and comments blanked)."""
    text = re.sub(r"<!--.*?-->", lambda m: re.sub(r"[^\n]", " ", m.group()), outside_fences(document).text, flags=re.S)
    for match in INLINE.finditer(text):
        if "..." in match.group(1) or match.group(1) in ("make", "joinlab"):
            continue  # `joinlab ...`, `make`: the tool, not a command
        yield Region(match.start(), match.end(), match.group(1), inline_span)


# --- Python blocks -------------------------------------------------------------------------------

def python_block(example):
    context = example.namespace["context"]
    page = Path(example.path).relative_to(ROOT)
    pattern = page.parts[1] if page.parts[0] == "jobs" else None
    setup = PYTHON_SETUP.get(pattern or str(page))
    if setup is None:
        pytest.fail(f"{page}:{example.line}: a Python block on a page test_pages.py has no namespace for: "
                    "add one to PYTHON_SETUP, or mark it not-run with its reason")
    setup(context, example.namespace)
    PythonEvaluator()(example)
    CHECK_AFTER[pattern or str(page)](example.namespace)


def job_namespace(module: str) -> dict:
    """The names a pattern's modules define, as job.py sees them: the snippets are its wiring."""
    import importlib
    names = {}
    for part in ("given", "rules", "solution", "job"):
        if importlib.util.find_spec(f"jobs.{module}.{part}"):
            names.update({k: v for k, v in vars(importlib.import_module(f"jobs.{module}.{part}")).items()
                          if not k.startswith("__")})
    return names


def overrides_only_what_its_base_has(namespace):
    """docs/state-evolution.md: the later release's class still hooks into UserEnrich."""
    cls = namespace["UserEnrichWithTier"]
    base = cls.__bases__[0]
    added = [name for name in vars(cls) if not name.startswith("__") and not hasattr(base, name)]
    assert not added, f"UserEnrichWithTier defines {added}, which UserEnrich has not: nothing calls them"
    assert cls.USER_SCHEMA.startswith(base.USER_SCHEMA + ","), "the new schema must only append to the old"


def evolution_setup(context, namespace):
    namespace.update(job_namespace("money_enrichment"))


PYTHON_SETUP = {"docs/state-evolution.md": evolution_setup}
CHECK_AFTER = {"docs/state-evolution.md": overrides_only_what_its_base_has}


# --- the pages, parsed by Sybil ------------------------------------------------------------------

def fenced_languages(document: Document):
    """Every fenced block with a language other than bash or python fails: nothing goes unchecked."""
    for region in FencedCodeBlockLexer(language=r"[^\s`]+")(document):
        if region.lexemes["language"] not in ("bash", "python"):
            yield Region(region.start, region.end, region.lexemes["language"], unknown_language)


def unknown_language(example):
    pytest.fail(f"{example.path}:{example.line}: a ```{example.parsed} block: test_pages.py checks bash and "
                "python blocks (a block without a language is output); teach it this one, or mark it not-run")


SYBIL = Sybil(parsers=[not_run_parser, CodeBlockParser("bash", shell_block), CodeBlockParser("python", python_block),
                       fenced_languages, inline_parser],
              patterns=["*.md", "*.py"], path=str(ROOT), document_types={".py": Document})


def examples(path: Path):
    return list(SYBIL.parse(path).examples())


def labelled() -> list:
    params = []
    for path in PAGES:
        previous = None
        for example in examples(path):
            what = example.parsed if example.region.evaluator is inline_span else (
                example.region.lexemes.get("arguments") or "not-run" if example.region.evaluator is NOT_RUN
                else example.region.lexemes.get("arguments", "block"))
            name = f"{path.relative_to(ROOT)}:{example.line} {what}"
            if previous is not None and previous.region.evaluator is NOT_RUN:
                name += " (not run)"
            params.append(pytest.param(example, id=name))
            previous = example
    return params


class Context:
    """What a page's examples share: the session's broker and Spark, asked for only when an
    example needs them, and a scratch folder."""

    def __init__(self, request, tmp):
        self.request, self.tmp = request, tmp

    def bootstrap(self) -> str:
        return self.request.getfixturevalue("kafka").bootstrap_servers

    def spark(self):
        return self.request.getfixturevalue("spark")

    @contextlib.contextmanager
    def environment(self):
        saved = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = self.bootstrap()
        try:
            yield
        finally:
            if saved is None:
                del os.environ["KAFKA_BOOTSTRAP_SERVERS"]
            else:
                os.environ["KAFKA_BOOTSTRAP_SERVERS"] = saved

    def topics_of_every_pattern(self) -> None:
        """The pages tail the patterns' topics: they exist on the session's broker (maybe empty)."""
        from joinlab import patterns
        from joinlab.topics import create_topics
        create_topics(self.bootstrap(), [t for p in patterns.PATTERNS for t in patterns.all_topics(p)])

    def workspace_makefile(self) -> Path:
        """A candidate's workspace as `joinlab interview pack` writes it (tweet views'), once."""
        from joinlab.interview.pack import pack
        folder = self.tmp / "workspace"
        if not (folder / "Makefile").exists():
            pack("tweet-views", folder)
        return folder


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("pages")


@pytest.mark.parametrize("example", labelled())
def test_the_page_example_works_as_shown(example, request, scratch):
    example.namespace["context"] = Context(request, scratch)
    example.evaluate()


def test_every_page_is_tested_or_left_out_with_its_reason():
    """A new page under docs/ or jobs/ is picked up; only the pages LEFT_OUT say why not."""
    tested = {str(p.relative_to(ROOT)) for p in PAGES}
    for page in [*ROOT.glob("docs/*.md"), *ROOT.glob("jobs/*/README.md")]:
        name = str(page.relative_to(ROOT))
        assert name in tested or LEFT_OUT.get(name), f"{name} is neither tested nor left out with a reason"


BROKEN_PAGE = """# A page

```bash
make no-such-target
```

<!-- not-run: shown for the reason beside it -->
```bash
make no-such-target
```

<!-- not-run: -->
Inline: `joinlab no-such-command`.
"""


def test_a_broken_command_fails_and_a_not_run_one_passes_with_its_reason(tmp_path, request):
    """The checker on a page of its own: an unmarked command that does not work fails; the same
    command marked not-run passes unrun; a marker without its reason fails."""
    page = tmp_path / "page.md"
    page.write_text(BROKEN_PAGE)
    outcomes = []
    for example in examples(page):
        example.namespace["context"] = Context(request, tmp_path)
        try:
            example.evaluate()
            outcomes.append((example.line, "passed"))
        except (AssertionError, pytest.fail.Exception) as exc:
            outcomes.append((example.line, "failed: " + str(exc).splitlines()[0]))
    assert [(line, outcome.split(":")[0]) for line, outcome in outcomes] == [
        (3, "failed"), (7, "passed"), (8, "passed"), (12, "failed"), (13, "failed")], outcomes
    assert "No rule to make target 'no-such-target'" in outcomes[0][1]
    assert "needs its reason" in outcomes[3][1]
