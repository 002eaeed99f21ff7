"""The money enrichment pattern: job.py wires it, solution.py holds its processors, README.md is its spec."""
