"""Batch answering: many questions from a file, one durable output line per question, resumable after a kill.

Rooms, bottom up: `outputs` (final files, summary lines), `inputs` (question files, InputRow), `journal`
(the append-only journal and resume), `answerer` (one row through the shared chain), `run` (run_batch).
This package re-exports the public names; see docs/batch.md for the behaviour."""

from rag_assistant.batch.answerer import Answerer, Chain
from rag_assistant.batch.inputs import BatchInputError, InputRow, read_input
from rag_assistant.batch.journal import Entry, Journal, journal_path, make_record, read_final_status
from rag_assistant.batch.outputs import summary_lines, write_atomic
from rag_assistant.batch.run import BatchSummary, RowDone, output_kind, run_batch

__all__ = [
    "Answerer",
    "BatchInputError",
    "BatchSummary",
    "Chain",
    "Entry",
    "InputRow",
    "Journal",
    "RowDone",
    "journal_path",
    "make_record",
    "output_kind",
    "read_final_status",
    "read_input",
    "run_batch",
    "summary_lines",
    "write_atomic",
]
