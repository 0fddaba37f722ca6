"""The `rag-assistant` command: parses arguments, calls the library, renders. Nothing else."""

from rag_assistant.cli.app import app, main

__all__ = ["app", "main"]
