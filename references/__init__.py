"""Batch references: what the right answer is, computed in plain Python from the input topics."""
