"""Batch answering: many questions from a file, one durable output line per question, resumable after a kill."""

from rag_assistant.batch.inputs import BatchInputError, InputRow, read_input
from rag_assistant.batch.run import BatchSummary, RowDone, journal_path, run_batch

__all__ = ["BatchInputError", "BatchSummary", "InputRow", "RowDone", "journal_path", "read_input", "run_batch"]
