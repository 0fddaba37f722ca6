"""What an install brings (pyproject.toml): LlamaIndex is the llamaindex extra, which the test script (and so CI)
installs; bm25s is only what tests and benchmarks compare against (tests/test_keyword.py runs the index without
it)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LLAMAINDEX = {
    "llama-index-core",
    "llama-index-vector-stores-chroma",
    "llama-index-llms-openai",
    "llama-index-llms-openai-like",
}


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in requirements}  # type: ignore[union-attr]


def test_llamaindex_and_bm25s_are_extras_the_test_script_installs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core, extras = _names(project["dependencies"]), project["optional-dependencies"]
    assert not core & (LLAMAINDEX | {"bm25s"})
    assert _names(extras["llamaindex"]) == LLAMAINDEX
    assert "bm25s" in _names(extras["test"])
    installs = re.findall(r'^\s*extras="([^"]*)"', (REPO / "scripts" / "test.sh").read_text(), re.MULTILINE)
    assert installs and all({"test", "llamaindex"} <= set(extras.split(",")) for extras in installs)
