"""`import chromadb` made cheaper: it is ~0.6 s of every command that opens the store. Nothing chromadb does
changes: garbage collections are paused while it imports, since each would walk its ~100k long-lived objects
again and again, and resumed as soon as the import is done.

Not done: `overrides`' @override, which chromadb puts on ~200 methods, checks each method's signature against
its base class as it is decorated (a third of the import's Python work, ~0.1 s); skipping it would mean
patching a dependency's module while another one imports."""

from __future__ import annotations

import gc
import sys
from types import ModuleType


def import_chromadb() -> ModuleType:
    """The chromadb module, imported with garbage collection paused unless it already is."""
    if "chromadb" in sys.modules:
        return sys.modules["chromadb"]
    collecting = gc.isenabled()
    gc.disable()
    try:
        import chromadb
    finally:
        if collecting:
            gc.enable()
    return chromadb
