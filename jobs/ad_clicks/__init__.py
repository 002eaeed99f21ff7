"""The ad clicks pattern: job.py wires it, solution.py holds the join condition and watermarks, README.md is its spec."""
