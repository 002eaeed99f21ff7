"""`joinlab bench`: per pattern the tiny batch, the steady rate and the ceiling; tweet views' latency.
The entry point is `main` (run.py); the studies behind the lab's settings are in perf/."""
from joinlab.bench.run import main
