"""Small helpers shared by several test modules (tests/ is on sys.path under pytest)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest


def require(ok: object, reason: str) -> None:
    """Skip a test whose prerequisite is missing on a developer's machine, but fail it under CI: CI installs every
    prerequisite (the ``all`` extra, Chromium and curl in .ci/run), so a skip there would hide a gap."""
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"missing under CI, which should provide it: {reason}")
    pytest.skip(reason)


def _load_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as a module (the scripts are not a package)."""
    return _load_path(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")


def load_server_fixture(name: str = "live") -> ModuleType:
    """``tests/fixtures/server/NAME.py`` as a module: ``live`` (a real uvicorn server on 127.0.0.1 and a real
    BM25 index) or ``raw`` (a raw-socket server that misbehaves on purpose)."""
    return _load_path(f"_sg_server_fixture_{name}", Path(__file__).resolve().parent / "fixtures" / "server" /
                      f"{name}.py")


class CountingRetriever:
    """A real retriever with every batch_search call recorded as (queries, k); search() goes through it too."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        self.calls.append((list(queries), k))
        return self.inner.batch_search(queries, k)

    @property
    def queries(self) -> list[list[str]]:
        """The queries of each call, in order."""
        return [q for q, _ in self.calls]

    def __getattr__(self, name):
        return getattr(self.inner, name)
