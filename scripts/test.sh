#!/usr/bin/env bash
# Set up a virtual environment (once) and run the whole test suite, slow tests included, on two workers
# (pytest-xdist; each test file runs on one worker, so module fixtures are built once).
# The llamacpp extra builds llama.cpp from source (about 5 minutes on 2 cores, once) for the integration
# test against a real OpenAI-compatible server; set SKIP_LLAMACPP=1 to leave it out (that test then skips).
# The llamaindex extra is installed so that the LlamaIndex integration (rag_assistant/integrations) is tested.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

build_pid=""
if [ "${SKIP_LLAMACPP:-0}" != 1 ]; then
    # llama.cpp must be built portable: a native build (-march=native) dies with "Illegal instruction" on
    # machines whose CPU reports AVX-512/AMX but faults on them. pip's wheel cache may hold such a native
    # wheel from an earlier build, so build from source without any cache. An install that was built with
    # AVX-512 or AMX (its system info says so) is replaced; a portable one is kept.
    if ! .venv/bin/python - <<'PY' 2>/dev/null; then
import sys
import llama_cpp

info = llama_cpp.llama_print_system_info().decode()
sys.exit(1 if ("AVX512 = 1" in info or "AMX" in info) else 0)
PY
        echo "building llama-cpp-python portable (GGML_NATIVE=OFF, AVX2) beside the other installs; about 5 minutes on 2 cores" >&2
        wheel_dir=$(mktemp -d)
        build_log="$wheel_dir/build.log"
        # The wheel is built in pip's isolated build environment, so it can run while the project's other
        # dependencies download into the venv. LLAVA_BUILD=OFF leaves out the multimodal library (the tests
        # serve text only), a good part of the build.
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF" \
            FORCE_CMAKE=1 CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            .venv/bin/python -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
            -w "$wheel_dir" "llama-cpp-python>=0.3" >"$build_log" 2>&1 &
        build_pid=$!
    fi
fi
.venv/bin/python -m pip install -q -e ".[test,llamaindex]"
extras="test,llamaindex"
if [ "${SKIP_LLAMACPP:-0}" != 1 ]; then
    extras="test,llamaindex,llamacpp"
    if [ -n "$build_pid" ]; then
        if ! wait "$build_pid"; then
            cat "$build_log" >&2
            echo "error: building llama-cpp-python failed (log above); SKIP_LLAMACPP=1 leaves that test out" >&2
            exit 1
        fi
        .venv/bin/python -m pip install -q --no-deps --force-reinstall "$wheel_dir"/llama_cpp_python-*.whl
        rm -rf "$wheel_dir"
    fi
fi
.venv/bin/python -m pip install -q -e ".[$extras]"
.venv/bin/python -m pytest -n 2 --dist loadfile "$@"
