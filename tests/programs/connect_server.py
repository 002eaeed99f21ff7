"""A lab Spark Connect server in a process of its own (joinlab.spark.embedded, master $SPARK_MASTER),
for the tests that kill one: prints `URL TOKEN`, then serves until its standard input closes."""
import sys

from joinlab.spark import embedded

url, token = embedded("test-server")
print(url, token, flush=True)
sys.stdin.read()
