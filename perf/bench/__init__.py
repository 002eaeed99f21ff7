"""`make bench` (`python -m perf.bench`): per pattern the tiny batch, the steady rate and the
ceiling; tweet views' latency. The entry point is run.main; the studies are beside it in perf/."""
