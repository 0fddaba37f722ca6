"""Evaluation harness: run the answer chain over a JSONL question set and score retrieval, citations,
support, abstention and latency (definitions in eval/README.md)."""
