"""`python -m rag_assistant`: the same command as `rag-assistant`."""

from rag_assistant.cli import main

main()
