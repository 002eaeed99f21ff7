"""Spark's Python workers start from the lab's daemon (joinlab.pyworkers), on real Spark: the
server's workers, asked through a Connect client's DataFrame (a client has no RDD API)."""
import pytest

pytestmark = pytest.mark.spark


def test_python_workers_import_pyspark_from_its_files_with_their_modules_already_imported_and_schemas_cached(
        spark):
    import pyspark
    from pyspark.sql.functions import udf

    def found(_):
        import sys

        import pyspark
        from pyspark.sql import types
        return (pyspark.__file__, "pandas" in sys.modules, "pyspark.worker" in sys.modules,
                hasattr(types._parse_datatype_json_string, "cache_info"))
    # A plain (pickled, not Arrow) Python UDF: its worker imports neither pandas nor pyarrow by
    # itself, so "pandas" is there only if the daemon imported it. Two partitions, two tasks.
    probe = udf(found, "file string, pandas boolean, worker boolean, cached boolean", useArrow=False)
    seen = [tuple(row.seen) for row in spark.range(0, 2, 1, 2).select(probe("id").alias("seen")).collect()]
    # not .../pyspark.zip/pyspark/__init__.py, compiled again by every new worker; a value read from
    # state has its schema parsed once per worker, not once per read
    assert seen == [(pyspark.__file__, True, True, True)] * 2


def test_a_python_worker_that_hangs_is_killed_and_its_task_tried_again_so_the_query_goes_on(tmp_path):
    """A transformWithState worker that neither reads nor writes (as one waiting for a state server
    thread that died) is killed after $LAB_PYTHON_IDLE_TIMEOUT, and its task tried again, also on a
    local master: the stage's output is whole, and the server's log says what happened. Without
    the timeout the micro-batch would wait forever; without the retry the query would fail."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.server_side import own_server_env

    hung = tmp_path / "hung"
    env = own_server_env() | {"LAB_HOME": str(tmp_path / "home"), "SPARK_MASTER": "local[2]",
                              "LAB_PYTHON_IDLE_TIMEOUT": "10", "LAB_SPARK_UI": "false"}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "programs" / "stuck_worker.py"), str(hung)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert hung.exists(), "the first task did not run the hanging processor"
    assert sorted(json.loads(line)["n"] for line in done.stdout.splitlines()) == [3, 3, 3], done.stdout
    assert "Terminating Python worker process due to idle timeout (timeout: 10 seconds)" in done.stderr
    assert "Lost task 0.0 in stage" in done.stderr  # the retry's: one attempt lost, the next one ran
