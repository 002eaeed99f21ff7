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
