"""Sphinx cross-reference roles in docstrings, rendered as links in the API reference, and a check for any left.

The package's docstrings use Sphinx roles (``:class:`~searchgym.trajectory.Trajectory```, ``:meth:`reset```).
mkdocstrings renders Markdown, where a role would show as ``:class:`` and a code span. Two parts:

- ``SphinxRoles``, a Griffe extension (``extensions:`` in mkdocs.yml's mkdocstrings options): before a docstring
  is rendered, each role becomes an autorefs cross-reference to the full name (a leading ``~`` shows the last
  part only, as in Sphinx). A short name is resolved in the scope of the object that carries the docstring. A
  target the site does not document renders as plain code (an ``optional`` reference), never as a role.
- ``on_post_page``, a MkDocs hook (``hooks:`` in mkdocs.yml): a page whose HTML still shows a role fails the
  build, so ``make docs`` (strict) never ships an unrendered one.
"""

from __future__ import annotations

import contextlib
import html
import re
from typing import Any

ROLE = re.compile(r":(?:py:)?(class|meth|func|attr|mod|data|exc|obj|const|property):`(~?)([^`<>]+?)`")
# what a role looks like once Markdown has rendered it (``:class:<code>X</code>``), or in raw text
LEFTOVER = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|data|exc|obj|const):(?:<code>|`)")


def _resolve(obj: Any, name: str) -> str | None:
    """The full path of ``name`` seen from ``obj`` (griffe's scope rules), or None."""
    if name.startswith("searchgym.") or "." in name and name.split(".")[0] in ("gymnasium", "numpy", "torch"):
        return name
    for scope in (obj, getattr(obj, "parent", None)):
        if scope is None:
            continue
        with contextlib.suppress(Exception):  # griffe's NameResolutionError and others: try the members
            return str(scope.resolve(name))
        members = getattr(scope, "members", {}) or {}
        head = name.split(".")[0]
        if head in members:
            return f"{scope.path}.{name}"
    return None


def convert(text: str, obj: Any = None) -> str:
    """``text`` with every Sphinx role replaced by an autorefs reference (shown as code)."""
    def one(m: re.Match[str]) -> str:
        tilde, target = m[2], m[3].strip().removesuffix("()")
        shown = target.rsplit(".", 1)[-1] if tilde else target
        full = _resolve(obj, target) if obj is not None else (target if "." in target else None)
        code = f"<code>{html.escape(shown)}</code>"
        if full is None:
            return code
        return f'<autoref identifier="{html.escape(full, quote=True)}" optional>{code}</autoref>'

    return ROLE.sub(one, text)


try:
    import griffe

    class SphinxRoles(griffe.Extension):
        """Convert Sphinx roles in every docstring before mkdocstrings renders it."""

        def on_object(self, *, obj: Any, **kwargs: Any) -> None:
            doc = getattr(obj, "docstring", None)
            if doc is not None and ROLE.search(doc.value):
                doc.value = convert(doc.value, obj)
except ImportError:  # the docs extra is not installed: the MkDocs hook below still loads
    pass


def on_post_page(output: str, page: Any, config: Any) -> str:
    """Fail the build when a page still shows a Sphinx role."""
    m = LEFTOVER.search(output)
    if m:
        from mkdocs.exceptions import PluginError

        ctx = re.sub(r"<[^>]+>", "", output[max(0, m.start() - 80):m.end() + 80]).replace("\n", " ")
        raise PluginError(f"{page.file.src_uri}: an unrendered Sphinx role ({m[0]}…) near: {ctx!r}; "
                          "docs/hooks/sphinx_roles.py converts :class:/:meth:/:func:/... roles in docstrings")
    return output
