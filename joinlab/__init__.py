"""Stream Join Lab: the machinery every join pattern shares (its modules: docs/architecture.md#layout)."""
