"""PySpark's zips carry bytecode, so Spark's Python processes do not compile PySpark at each start."""
import os
import subprocess
import sys
import zipfile

from joinlab import worker_bytecode


def _import_from(path, module: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run([sys.executable, "-c", f"import {module}; print({module}.__file__)"], env=env,
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_installed_pyspark_zip_is_imported_from_bytecode_as_spark_workers_import_it():
    pyspark_zip = worker_bytecode.zips()[0]
    assert pyspark_zip.name == "pyspark.zip" and worker_bytecode.has_bytecode(pyspark_zip), \
        "run `make install` (or python -m joinlab.worker_bytecode)"
    assert _import_from(pyspark_zip, "pyspark.worker") == f"{pyspark_zip}/pyspark/worker.pyc"


def test_added_bytecode_runs_like_its_source_and_is_added_once(tmp_path):
    archive = tmp_path / "pkg.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/answer.py", "VALUE = sum(range(10))\n")
        z.writestr("pkg/tests/test_x.py", "raise SystemExit('never compiled')\n")
    assert _import_from(archive, "pkg.answer").endswith("pkg/answer.py")
    assert worker_bytecode.add_bytecode(archive) == 2  # pkg/__init__ and pkg/answer, not tests/
    assert _import_from(archive, "pkg.answer").endswith("pkg/answer.pyc")
    env = {**os.environ, "PYTHONPATH": str(archive)}
    assert subprocess.run([sys.executable, "-c", "import pkg.answer; print(pkg.answer.VALUE)"], env=env,
                          capture_output=True, text=True, cwd="/").stdout.strip() == "45"
    assert worker_bytecode.add_bytecode(archive) == 0
