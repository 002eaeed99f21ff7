"""The tweet views pattern: job.py wires it, solution.py holds its processors, README.md is its spec."""
