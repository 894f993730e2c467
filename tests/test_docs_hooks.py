"""docs/hooks/sphinx_roles.py: Sphinx roles in docstrings become cross-references, and a page that still shows one
fails the docs build (issue 35: the API reference showed 13 raw roles under a strict build)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

HOOK = Path(__file__).resolve().parents[1] / "docs" / "hooks" / "sphinx_roles.py"
spec = importlib.util.spec_from_file_location("sphinx_roles", HOOK)
roles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(roles)


def test_roles_become_autorefs_with_sphinx_display_rules():
    out = roles.convert("a :class:`~searchgym.envs.actions.SearchAction` or :func:`searchgym.make_agent` or "
                        ":meth:`reset`")
    assert ":class:" not in out and ":func:" not in out and ":meth:" not in out
    assert '<autoref identifier="searchgym.envs.actions.SearchAction" optional><code>SearchAction</code>' in out
    assert '<autoref identifier="searchgym.make_agent" optional><code>searchgym.make_agent</code>' in out
    assert "<code>reset</code>" in out  # no scope to resolve it in: plain code, never a raw role


def test_a_short_name_resolves_in_the_docstrings_scope():
    cls = SimpleNamespace(path="searchgym.envs.vector.SearchVectorEnv", members={"pop_finished_trajectories": 1},
                          resolve=lambda name: (_ for _ in ()).throw(KeyError(name)), parent=None)
    out = roles.convert("take them with :meth:`pop_finished_trajectories`", cls)
    assert 'identifier="searchgym.envs.vector.SearchVectorEnv.pop_finished_trajectories"' in out


def test_a_page_with_a_raw_role_fails_the_build():
    pytest.importorskip("mkdocs")
    from mkdocs.exceptions import PluginError

    page = SimpleNamespace(file=SimpleNamespace(src_uri="api.md"))
    ok = "<p>kept as <a class='autorefs'>Trajectory</a> records</p>"
    assert roles.on_post_page(ok, page, None) == ok
    with pytest.raises(PluginError, match="unrendered Sphinx role"):
        roles.on_post_page("<p>a :class:<code>~searchgym.envs.actions.SearchAction</code></p>", page, None)


def test_nav_is_grouped_and_the_environment_page_has_gymnasiums_sections():
    import re

    root = HOOK.parents[2]
    nav = (root / "mkdocs.yml").read_text(encoding="utf-8").split("nav:", 1)[1].split("\n\n", 1)[0]
    groups = re.findall(r"^  - ([^:]+):\s*$", nav, flags=re.MULTILINE)
    assert groups == ["Get started", "Guides", "Reference", "Experiments"]
    pages = set(re.findall(r":\s*(\S+\.md)", nav))
    assert pages == {p.name for p in (root / "docs").glob("*.md")}  # every page is in the nav
    heads = re.findall(r"^## (.+)$", (root / "docs" / "environment.md").read_text(encoding="utf-8"),
                       flags=re.MULTILINE)
    want = ["Action Space", "Observation Space", "Rewards", "Starting State", "Episode End", "Arguments",
            "Version History"]
    assert [h for h in heads if h in want] == want
