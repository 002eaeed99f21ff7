"""`joinlab bench`: raw clients, Spark's source, the job, plain Python and latency on one event set.
The pieces live in the modules of this package; `main` (in run.py) is the entry point."""
from joinlab.bench.run import main
