"""Parsing corpus files into papers. Touches only the file system; knows nothing of the index."""

from rag_assistant.corpus.loader import CorpusLoad, bundled_corpus_path, load_corpus
from rag_assistant.corpus.models import Paper

__all__ = ["CorpusLoad", "Paper", "bundled_corpus_path", "load_corpus"]
