"""`import chromadb` made cheaper: it is ~0.6 s of every command that opens the store. Nothing chromadb does
changes.

Two things go while it imports: garbage collections, which would walk its ~100k long-lived objects again and
again, and the check in the `overrides` package's @override. chromadb decorates ~200 methods with it, and each
decoration disassembles the class body and compares the method's signature with the base class's: a check for
chromadb's own developers. The decorator is reduced to its marker (`__override__`), which is all chromadb's
`EnforceOverrides` classes look for, and put back as soon as the import is done."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


def import_chromadb() -> ModuleType:
    """The chromadb module, imported the cheaper way unless it already is."""
    if "chromadb" in sys.modules:
        return sys.modules["chromadb"]
    with _no_collections(), _unchecked_overrides():
        import chromadb
    return chromadb


@contextmanager
def _no_collections() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextmanager
def _unchecked_overrides() -> Iterator[None]:
    try:
        import overrides
    except ImportError:  # a chromadb that no longer uses it
        yield
        return
    checked = overrides.override, overrides.overrides
    overrides.override = overrides.overrides = _mark
    try:
        yield
    finally:
        overrides.override, overrides.overrides = checked


def _mark(method: Any = None, **_: Any) -> Any:  # noqa: ANN401 - decorates any callable
    """What @override leaves on a method, without the check; also the @override(...) form."""
    if method is None:
        return _mark
    method.__override__ = True
    return method
