"""Optional bridges to other frameworks (llamaindex.py: our retriever and LLM settings as LlamaIndex parts); each
imports its framework and is imported only by users who ask for it, never by the rest of the package."""
