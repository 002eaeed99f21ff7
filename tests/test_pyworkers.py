"""Spark's Python workers start from the lab's daemon (joinlab.pyworkers), on real Spark."""
import pytest

pytestmark = pytest.mark.spark


def test_python_workers_import_pyspark_from_its_files_with_their_modules_already_imported_and_schemas_cached(
        spark):
    import pyspark

    def found(_):
        import sys

        import pyspark
        from pyspark.sql import types
        yield (pyspark.__file__, "pandas" in sys.modules, "pyspark.worker" in sys.modules,
               hasattr(types._parse_datatype_json_string, "cache_info"))
    seen = spark.sparkContext.parallelize([0, 1], 2).mapPartitions(found).collect()
    # not .../pyspark.zip/pyspark/__init__.py, compiled again by every new worker; a value read from
    # state has its schema parsed once per worker, not once per read
    assert seen == [(pyspark.__file__, True, True, True)] * 2
