"""The house rules, checked against the code: layers only import downwards, no import circles, small modules
and functions, every module says what it owns, and docs/architecture.md lists the modules as they are."""

from __future__ import annotations

import ast

import architecture as arch

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_every_module_is_in_a_room_and_imports_only_downwards() -> None:
    assert arch.upward_imports() == []


def test_no_import_circles() -> None:
    assert arch.cycles() == []


def test_modules_and_functions_stay_small() -> None:
    too_long = []
    for m in arch.modules():
        lines = len(m.path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{m.name}: {lines} lines")
        for node in ast.walk(m.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{m.name}.{node.name}: {length} lines")
    assert too_long == []


def test_every_module_says_what_it_owns() -> None:
    assert [m.name for m in arch.modules() if not m.summary] == []


def test_architecture_doc_matches_the_code() -> None:
    text = arch.DOC.read_text(encoding="utf-8")
    assert arch.generated_doc(text) == text, "docs/architecture.md is stale: run `python tests/architecture.py --write`"


def test_the_layering_check_catches_an_upward_import(monkeypatch) -> None:  # noqa: ANN001
    """The check itself must be able to fail: an index module importing the answer chain is reported."""
    real = arch.modules()
    store = next(m for m in real if m.name == "rag_assistant.index.store")
    fake = arch.Module(store.name, store.path, ast.parse("from rag_assistant.answer.chain import AnswerChain\n"))
    monkeypatch.setattr(arch, "modules", lambda: (fake, *(m for m in real if m is not store)))
    assert arch.upward_imports() == ["rag_assistant.index.store imports rag_assistant.answer.chain (answer floor)"]
