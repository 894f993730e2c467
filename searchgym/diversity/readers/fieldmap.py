"""``--map FIELD=EXPR`` / ``--map-file``: a declarative field map in JMESPath, the escape hatch for any JSON dump.

JMESPath rather than jq: it is pure Python (no native build), has a written specification with a compliance test
suite that every implementation runs, and is what the AWS CLI (``--query``) and Ansible (``json_query``) use, so
many people already write it. Fields: ``queries`` (strings, lists, objects with a query-like key, JSON-encoded
``arguments`` strings: all taken as queries that ran), ``question``, ``reward``, ``success``, ``step``,
``evidence`` (one item per query, or one for the episode), ``answer``, ``episode_id`` and ``episode`` (the
episodes inside one record; the other expressions then apply to each). Fields not mapped are found by name as
the generic reader finds them (``fields``), and queries, when not mapped, by the generic reader.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError

FIELDS = ("queries", "question", "reward", "success", "step", "evidence", "answer", "episode_id", "episode")


def parse(items: list[str] | tuple[str, ...] | None, map_file: str | Path | None = None) -> dict[str, Any]:
    """FIELD -> compiled JMESPath expression from ``--map FIELD=EXPR`` items and a JSON / YAML map file."""
    raw: dict[str, str] = {}
    if map_file is not None:
        raw.update(_load_file(Path(map_file)))
    for item in items or ():
        field, sep, expr = item.partition("=")
        if not sep or not field.strip() or not expr.strip():
            raise ConfigError(f"--map {item!r}: write FIELD=EXPR, e.g. --map 'queries=steps[?action==`search`].query'")
        raw[field.strip()] = expr.strip()
    return compile_map(raw)


def compile_map(raw: dict[str, Any]) -> dict[str, Any]:
    try:
        import jmespath
        from jmespath.exceptions import JMESPathError
    except ImportError:
        raise ConfigError("--map needs the jmespath package (a dependency of searchgym): pip install "
                          "'jmespath>=1.0,<2'") from None

    out: dict[str, Any] = {}
    for field, expr in raw.items():
        if field not in FIELDS:
            raise ConfigError(f"--map field {field!r} is not one of {', '.join(FIELDS)}")
        if not isinstance(expr, str) or not expr.strip():
            raise ConfigError(f"--map {field}: the expression must be a non-empty string, got {expr!r:.60}")
        try:
            with warnings.catch_warnings():  # `search` (an unquoted literal) is deprecated but still JMESPath
                warnings.simplefilter("ignore", PendingDeprecationWarning)
                out[field] = jmespath.compile(expr)
        except JMESPathError as exc:
            raise ConfigError(f"--map {field}={expr!r} is not valid JMESPath: {' '.join(str(exc).split())}") from None
    return out


def _load_file(p: Path) -> dict[str, str]:
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--map-file {p}: cannot read it ({exc})") from None
    data: Any
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"--map-file {p}: reading YAML needs PyYAML (pip install pyyaml), or write the "
                              "map as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--map-file {p} is not valid YAML: {' '.join(str(exc).split())[:200]}") from None
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--map-file {p} is not valid JSON ({exc}); a .yaml / .yml file is read as YAML") \
                from None
    if not isinstance(data, dict):
        raise ConfigError(f"--map-file {p} must hold an object of FIELD: EXPR, got {type(data).__name__}")
    return data


def to_text(fieldmap: dict[str, str]) -> str:
    """A map as the ``--map`` arguments of a command line."""
    return " ".join(f"--map '{k}={v}'" for k, v in fieldmap.items())


def search(expr: Any, obj: Any) -> Any:
    return expr.search(obj)
