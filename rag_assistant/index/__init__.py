"""Chunking, embedding and storage. Depends on corpus; knows nothing of retrieval or answers."""
