"""Every notebook in notebooks/ runs top to bottom, headless, against an embedded broker.

Each notebook is a parameter, so a new pattern's notebook is tested as soon as it exists. The
kernel is this interpreter (the venv's), from a kernelspec written to a temporary directory, so no
user-level kernelspec is needed. A cell error fails the test with the cell's traceback (nbclient's
CellExecutionError); the notebook must also print its verify report with 0 mismatches.

The notebooks share one kernel (a fresh one costs each notebook seconds), a client of the test
session's Spark Connect server ($SPARK_REMOTE, the `spark` fixture's), as a notebook in the lab is a
client of the lab's: a kernel left to start a server of its own would start it once only, and the
first notebook's `lab.stop()` would end it for the rest. Each notebook gets its own lab home and topics,
and runs after a first cell that clears the kernel's names (`%reset -f`) and sets its environment
afresh; each one's own last cell ends its Spark session. A notebook that fails has its kernel shut
down, so the next one starts in a new kernel and a failure is never passed on.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))

# Each notebook small and short; STRICT: no graceful fallback (e.g. when the state cannot be read).
# The interview notebooks run the lab's own answer (USE_SOLUTION), so they must end green too.
SMALL = {"LAB_NOTEBOOK_EVENTS": "600", "LAB_NOTEBOOK_RATE": "300", "LAB_NOTEBOOK_STRICT": "1",
         "LAB_NOTEBOOK_USE_SOLUTION": "1"}
CELL_TIMEOUT_S = 300    # Spark's start plus a first micro-batch on two busy cores fit well inside
NOTEBOOK_TIMEOUT_S = 600  # the whole notebook, kernel start to shutdown


def test_notebooks_exist():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_valid_and_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.get("outputs") or cell.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs or execution counts; strip them before "
                       f"committing (e.g. `.venv/bin/jupyter nbconvert --clear-output --inplace {path}`)")


def _kernel_manager(kernels_dir: Path):
    """A kernel manager whose only kernel runs `sys.executable -m ipykernel_launcher`."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    spec_dir = kernels_dir / "joinlab-test"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "joinlab (test)", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(kernels_dir)], ensure_native_kernel=False)
    return AsyncKernelManager(kernel_name="joinlab-test", kernel_spec_manager=specs)


def _text_outputs(nb) -> str:
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif "data" in output:
                parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)


class _SharedKernel:
    """The notebooks' kernel: nbclient starts it for the first notebook (there is none yet) and
    leaves it running for the next ones, which find it there. After a failure it is shut down, and
    its manager with it (a manager's channels do not outlive its kernel), so the next notebook
    starts a new kernel through a new manager."""

    def __init__(self, kernels_dir: Path):
        self.kernels_dir, self._km = kernels_dir, None

    @property
    def km(self):
        if self._km is None:
            self._km = _kernel_manager(self.kernels_dir)
        return self._km

    def shut_down(self) -> None:
        from jupyter_core.utils import run_sync
        if self._km is not None and self._km.has_kernel:
            run_sync(self._km.shutdown_kernel)(now=True)
        self._km = None


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    shared = _SharedKernel(tmp_path_factory.mktemp("kernels"))
    yield shared
    shared.shut_down()


def _fresh_start(env: dict[str, str]):
    """The cell each notebook starts with in the shared kernel: no names left from the last notebook,
    and exactly this environment (a notebook may have set a variable of its own)."""
    from nbformat.v4 import new_code_cell
    return new_code_cell("%reset -f\nimport os\nos.environ.clear()\nos.environ.update(" + repr(env) + ")\ndel os")


@pytest.mark.spark
@pytest.mark.timeout(NOTEBOOK_TIMEOUT_S)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, tmp_path, kernel, bootstrap, spark):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, **SMALL, "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
           "LAB_HOME": str(tmp_path / "home"), "SPARK_MASTER": "local[2]", "MPLBACKEND": "Agg",
           "PYTHONUNBUFFERED": "1"}
    nb.cells.insert(0, _fresh_start(env))
    client = NotebookClient(nb, km=kernel.km, timeout=CELL_TIMEOUT_S,
                            startup_timeout=120, resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
                            extra_arguments=["--InteractiveShell.colors=nocolor"])  # plain tracebacks
    try:
        client.execute(env=env)  # raises CellExecutionError with the failing cell's traceback
    except BaseException:
        kernel.shut_down()  # the next notebook starts in a new kernel
        raise
    finally:
        if client.kc is not None:
            client.kc.stop_channels()
        nbformat.write(nb, tmp_path / path.name)  # the executed notebook, to look at after a failure
    text = _text_outputs(nb)
    assert "0 mismatches (OK)" in text, f"no successful verify report in {tmp_path / path.name}:\n{text[-3000:]}"


# --- The pattern-agnostic helpers, without a broker or Spark ------------------------------------

def test_frame_flattens_json_values_and_keeps_the_rest_raw():
    import pandas as pd
    from joinlab.notebook import frame
    from joinlab.topics import Consumed
    records = [Consumed("t", 0, 0, b"7", b'{"id": 7, "author": {"name": "Ann"}, "key": "k"}', 0),
               Consumed("t", 1, 0, b"8", b"\xff\xfegarbage", 1000)]
    df = frame(records)
    assert df.loc[0, "id"] == 7 and pd.isna(df.loc[1, "id"]) and str(df["id"].dtype) == "Int64"
    assert df.loc[0, "author.name"] == "Ann" and df.loc[0, "value.key"] == "k" and df.loc[0, "key"] == "7"
    assert df.loc[1, "raw"].endswith("garbage") and df.loc[1, "time"].year == 1970


def test_progress_helpers_count_records_from_offsets_and_list_state_variables():
    import pandas as pd
    from joinlab.notebook import rows
    from joinlab.status import offset_spans
    from joinlab.checkpoint_state import _state_variables
    source = {"startOffset": {"a": {"0": 5, "1": 0}}, "endOffset": {"a": {"0": 9, "1": 3}, "b": {"0": 2}}}
    assert offset_spans(source) == {"a": 4 + 3, "b": 2}
    assert offset_spans({"startOffset": None, "endOffset": '{"a": {"0": 4}}'}) == {"a": 4}
    props = '{"stateVariables": [{"stateName": "user", "stateVariableType": "ValueState"}]}'
    assert _state_variables(props) == ["user (ValueState)"] and _state_variables(None) == []
    df = pd.DataFrame({"user_id": [1, 2]})
    assert list(rows(df, user_id=2).user_id) == [2] and rows(pd.DataFrame(), user_id=2).empty


def test_the_progress_table_has_a_row_per_batch_that_ran_with_the_status_line_s_numbers_and_the_state_s_memory():
    """`lab.progress()` and `lab.watch()`: joinlab.status's numbers per micro-batch, the records read
    in all and the state's memory (what plot_progress draws); an idle trigger adds no row."""
    import types
    from joinlab.kit.kafka import COUNTED
    from joinlab.notebook.progress import batches
    job = types.SimpleNamespace(INPUT_TOPICS=["users", "tweets"], OUTPUT_TOPICS=["views", "views-dlq"],
                                DEAD_LETTERS_TOPIC="views-dlq")

    def progress(batch, start, end, out, ran=True):
        return {"batchId": batch, "durationMs": {"addBatch": 5, "triggerExecution": 800} if ran else {},
                "sources": [{"startOffset": start, "endOffset": end}], "observedMetrics": {COUNTED: out},
                "stateOperators": [{"numRowsTotal": 4 + batch, "numRowsUpdated": 1, "memoryUsedBytes": 2048},
                                   {"numRowsTotal": 1, "numRowsUpdated": 0, "memoryUsedBytes": 1024}]}
    first, second = {"users": {"0": 3}, "tweets": {"0": 4}}, {"users": {"0": 3}, "tweets": {"0": 6}}
    table = batches(job, [progress(0, None, first, {"views": 4, "views-dlq": 1}),
                          progress(1, first, second, {"views": 2, "views-dlq": 0}),
                          progress(1, second, second, {}, ran=False)])
    assert list(table.index) == [0, 1] and list(table["records in"]) == [7, 2] and list(table["in tweets"]) == [4, 2]
    assert list(table["out views"]) == [4, 2] and list(table["dead letters"]) == [1, 0]
    assert list(table["state rows"]) == [5, 6] and list(table["state memory KiB"]) == [3.0, 3.0]
    assert batches(job, []).empty


def test_an_unreadable_state_falls_back_to_a_message_unless_strict(monkeypatch, capsys):
    from joinlab.notebook import Lab
    lab = Lab.__new__(Lab)
    lab.checkpoint, lab.query = "/nowhere", None

    def fail():
        raise RuntimeError("no state here\nmore detail")
    monkeypatch.delenv("LAB_NOTEBOOK_STRICT", raising=False)
    assert lab._read_state("state variable 'x'", fail).empty
    assert "could not read state variable 'x' from /nowhere: no state here" in capsys.readouterr().out
    monkeypatch.setenv("LAB_NOTEBOOK_STRICT", "1")
    with pytest.raises(RuntimeError, match="no state here"):
        lab._read_state("state variable 'x'", fail)
