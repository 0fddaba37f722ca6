"""Answer generation, citation verification and the answer chain. Depends on retrieve and index."""
