"""A passage store with random access by row that is never loaded whole: an offset-indexed record file.

Layout (inside an index directory)::

    passages/records.bin    one JSON array ``[id, title, text]`` per passage, UTF-8, back to back
    passages/offsets.u64    n + 1 little-endian uint64 byte offsets into records.bin (raw, memory-mapped)

Both files are memory-mapped on load, so opening a 21M-passage store costs two ``mmap`` calls and reading a
hit costs one slice and one ``json.loads``; the page cache holds whatever is hot. Written streaming by
:class:`PassageStoreWriter` (constant memory: records and offsets go to disk as they come).
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, overload

import numpy as np

from searchgym.errors import IndexCorruptError
from searchgym.retrieval.base import Passage

RECORDS = "records.bin"
OFFSETS = "offsets.u64"
_OFFSET_DTYPE = np.dtype("<u8")


class PassageStoreWriter:
    """Append passages to ``DIR/records.bin`` + ``DIR/offsets.u64``; resumable from a known row count."""

    def __init__(self, d: Path, *, resume_rows: int = 0) -> None:
        d.mkdir(parents=True, exist_ok=True)
        self.dir = d
        rec, off = d / RECORDS, d / OFFSETS
        if resume_rows == 0 or not off.exists():
            rec.write_bytes(b"")
            off.write_bytes(np.zeros(1, _OFFSET_DTYPE).tobytes())
            self.rows, self.pos = 0, 0
        else:  # truncate both to the rows a checkpoint recorded
            offs = np.fromfile(off, dtype=_OFFSET_DTYPE, count=resume_rows + 1)
            self.rows, self.pos = resume_rows, int(offs[-1])
            with open(off, "r+b") as f:
                f.truncate((resume_rows + 1) * _OFFSET_DTYPE.itemsize)
            with open(rec, "r+b") as f:
                f.truncate(self.pos)
        self._rec: BinaryIO = open(rec, "ab")  # noqa: SIM115 - closed in close()
        self._off: BinaryIO = open(off, "ab")  # noqa: SIM115
        self._pending: list[int] = []

    def add(self, p: Passage) -> None:
        b = json.dumps([p.id, p.title, p.text], ensure_ascii=False).encode("utf-8")
        self._rec.write(b)
        self.pos += len(b)
        self.rows += 1
        self._pending.append(self.pos)
        if len(self._pending) >= 8192:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._off.write(np.asarray(self._pending, _OFFSET_DTYPE).tobytes())
            self._pending.clear()
        self._rec.flush()
        self._off.flush()

    def close(self) -> None:
        self.flush()
        self._rec.close()
        self._off.close()


class PassageStore(Sequence[Passage]):
    """Read-only ``Sequence[Passage]`` over a memory-mapped record file (row ``i`` = index row ``i``)."""

    def __init__(self, d: Path, n: int) -> None:
        self.dir = d
        rec, off = d / RECORDS, d / OFFSETS
        want = (n + 1) * _OFFSET_DTYPE.itemsize
        if off.stat().st_size != want:
            raise IndexCorruptError(f"{off} has {off.stat().st_size} bytes, {n} passages need {want}")
        self._offsets = np.memmap(off, dtype=_OFFSET_DTYPE, mode="r", shape=(n + 1,))
        size = rec.stat().st_size
        if int(self._offsets[0]) != 0 or int(self._offsets[-1]) != size:
            raise IndexCorruptError(f"{off} does not span {rec} (0..{size} bytes)")
        self._n = n
        with open(rec, "rb") as f:
            self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return self._n

    def _read(self, i: int) -> Passage:
        a, b = int(self._offsets[i]), int(self._offsets[i + 1])
        if not 0 <= a <= b <= len(self._buf):
            raise IndexCorruptError(f"{self.dir / OFFSETS}: offsets of row {i} are out of order or out of range")
        try:
            pid, title, text = json.loads(self._buf[a:b])
        except (ValueError, TypeError):
            raise IndexCorruptError(f"{self.dir / RECORDS}: record {i} is damaged") from None
        if not (isinstance(pid, str) and isinstance(title, str) and isinstance(text, str)):
            raise IndexCorruptError(f"{self.dir / RECORDS}: record {i} is not [id, title, text]")
        return Passage(pid, title, text)

    @overload
    def __getitem__(self, i: int) -> Passage: ...

    @overload
    def __getitem__(self, i: slice) -> list[Passage]: ...

    def __getitem__(self, i: int | slice) -> Passage | list[Passage]:
        if isinstance(i, slice):
            return [self._read(j) for j in range(*i.indices(self._n))]
        j = int(i)
        if j < 0:
            j += self._n
        if not 0 <= j < self._n:
            raise IndexError(f"passage row {i} out of range (0..{self._n - 1})")
        return self._read(j)

    def __iter__(self) -> Iterator[Passage]:
        return (self._read(j) for j in range(self._n))

    def __repr__(self) -> str:
        return f"PassageStore({self.dir}, n={self._n})"
