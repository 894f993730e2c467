"""The input budget of ``analyze``: how many bytes one input may hold once decoded, whatever its container.

One number bounds raw, gzip and Parquet input alike (default 1 GiB): ``--max-bytes`` on the command line, else
the environment variable ``SEARCHGYM_ANALYZE_MAX_BYTES``, else the default. Both are validated when an input is
read (never at import): a value that is not a positive size is a one-line ``ConfigError``. A compressed input is
further held to ``MAX_EXPANSION`` times its own size past ``EXPANSION_FLOOR`` (a gzip bomb is refused before it
is held in memory), and one JSON record to ``MAX_CONTAINERS`` objects and arrays.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator

from searchgym.errors import ConfigError

ENV = "SEARCHGYM_ANALYZE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
# a compressed input may decode to at most this many times its size (above the floor): real rollout dumps
# compress 5-50x; a gzip of one repeated byte, 1,000x
MAX_EXPANSION = 200
EXPANSION_FLOOR = 64 << 20
# objects + arrays in one JSON record (a 12,000-step trajectory holds about 50,000)
MAX_CONTAINERS = 1_000_000
# CSV / TSV header columns
MAX_COLUMNS = 4096

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("searchgym_analyze_max_bytes", default=None)


def parse_size(value: str | int, what: str) -> int:
    """A positive byte count from ``1073741824``, ``512M``, ``1G``, ``2GiB``; else a ``ConfigError``."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = _SIZE.match(str(value))
        if m is None:
            raise ConfigError(f"{what} must be a positive size in bytes (e.g. 1073741824, 512M or 2G), "
                              f"got {str(value)[:40]!r}")
        n = int(float(m.group(1)) * _UNIT[m.group(2).lower()])
    if n <= 0:
        raise ConfigError(f"{what} must be a positive size in bytes (e.g. 512M or 2G), got {str(value)[:40]!r}")
    return n


def max_bytes() -> int:
    """The budget in force: the one set by ``limit``, else ``SEARCHGYM_ANALYZE_MAX_BYTES``, else 1 GiB."""
    n = _LIMIT.get()
    if n is not None:
        return n
    env = os.environ.get(ENV)
    if env is None or not env.strip():
        return DEFAULT_MAX_BYTES
    return parse_size(env, ENV)


@contextlib.contextmanager
def limit(n: int | str | None) -> Iterator[int]:
    """``with limit(n): read_run(...)``: the budget for the inputs read inside (None: the environment's)."""
    value = max_bytes() if n is None else parse_size(n, "--max-bytes")
    token = _LIMIT.set(value)
    try:
        yield value
    finally:
        _LIMIT.reset(token)


def too_big(path: object, what: str, budget: int) -> str:
    return (f"{path}: {what} more than {budget:,} bytes, the input budget; raise it with --max-bytes "
            f"(or {ENV}) if the file is meant to be this large")
