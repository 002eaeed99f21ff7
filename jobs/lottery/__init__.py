"""Lottery: job.py is the query, solution.py its processors, README.md its spec page; parts.py
gathers what joinlab reads. Empty of imports on purpose (parts.py says why)."""
