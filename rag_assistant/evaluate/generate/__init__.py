"""Generated question sets (`rag-assistant eval-generate`): questions with verified gold papers written by an
OpenAI-compatible LLM from the ingested corpus, filtered, and saved in the dataset format (eval/README.md)."""
