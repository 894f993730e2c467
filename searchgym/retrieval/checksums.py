"""File checksums for index directories and caches: xxh3-128 (xxhash, ~20 GB/s) or blake2b without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_CHUNK = 1 << 22


def hasher(algorithm: str) -> Any:
    """A fresh hash object for ``algorithm``; KeyError for an unknown name, ImportError without xxhash."""
    if algorithm == "xxh3_128":
        import xxhash

        return xxhash.xxh3_128()
    if algorithm == "blake2b":
        import hashlib

        return hashlib.blake2b(digest_size=16)
    raise KeyError(algorithm)


def default_checksum_algorithm() -> str:
    try:
        import xxhash  # noqa: F401
    except ImportError:
        return "blake2b"
    return "xxh3_128"


def file_checksum(path: Path, algorithm: str) -> str:
    """Hex digest of a file, read in 4 MiB chunks (bounded memory for any file size)."""
    h = hasher(algorithm)
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()
