"""Start a real Chroma server (`chroma run`) on 127.0.0.1 for tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rag_assistant.config import Settings

BACKENDS = ("embedded", "server")  # the Chroma deployments a store test runs against


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ChromaServer:
        exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
        self.proc = subprocess.Popen(
            [exe, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("chroma run exited early")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError("chroma server did not start within 60 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@contextmanager
def backend_settings(backend: str, tmp_path: Path, collection: str) -> Iterator[Settings]:
    """Settings naming a fresh `collection`: embedded in the data dir, or on a Chroma server started for it."""
    if backend == "embedded":
        yield Settings(data_dir=tmp_path / "data", collection=collection)
    else:
        with ChromaServer(tmp_path / "server") as server:
            yield Settings(data_dir=tmp_path / "data", collection=collection, chroma_url=server.url)
