"""rag-assistant: answers questions about a corpus of paper abstracts, with verified citations."""

__version__ = "0.1.0"
