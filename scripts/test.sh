#!/usr/bin/env bash
# Set up a virtual environment (once) and run the whole test suite, slow tests included.
# The llamacpp extra builds llama.cpp from source (about 5 minutes on 2 cores, once) for the integration
# test against a real OpenAI-compatible server; set SKIP_LLAMACPP=1 to leave it out (that test then skips).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
extras="test"
[ "${SKIP_LLAMACPP:-0}" = 1 ] || extras="test,llamacpp"
.venv/bin/python -m pip install -q -e ".[$extras]"
.venv/bin/python -m pytest "$@"
