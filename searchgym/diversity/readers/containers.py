"""Containers: a file (or a pipe) -> records.

The input is read exactly once (so ``analyze <(zcat run.jsonl.gz)`` works: a pipe cannot be read twice) into
a ``Source``; detection and reading then work on its bytes. Every input is held to one budget (``budget``:
1 GiB decoded by default, ``--max-bytes``): a regular file, a pipe or a FIFO is read in chunks and refused past
it; a device is refused; gzip is undone here (checked in a first pass that keeps nothing: the budget, a bomb's
expansion, and an end marker: a cut file is an error); Parquet rows are produced batch by batch with their
decoded size counted from dictionary-encoded columns. Containers: JSONL, a JSON array (streamed element by
element, never parsed whole), a JSON object (or one holding the list of episodes under some key), CSV / TSV (a
header row of at most ``budget.MAX_COLUMNS`` columns; a row holds its non-empty cells; cells that hold JSON lists
or objects are decoded), Parquet (row batches), and plain text (logs; see ``logs``).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import budget as B
from searchgym.errors import TrajectoryFormatError

_DECODER = json.JSONDecoder()
_WS = b" \t\r\n"
_HEADER_FIELD = re.compile(r"^[A-Za-z_][\w .\-/]{0,60}$")
_NONBLANK = re.compile(rb"[^ \t\r\n\x0b\x0c]")
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_CHUNK = 1 << 20
_GZ_CHUNK = 16 << 20


@dataclass
class Source:
    """One input's bytes (decompressed) and the container they hold."""

    path: Path
    data: bytes
    container: str          # jsonl | json-array | json-object | csv | tsv | parquet | text | empty
    compression: str = ""   # gzip or ""
    limit: int = B.DEFAULT_MAX_BYTES  # the input budget it was read under (Parquet rows count against it)
    cut_lines: list[str] = field(default_factory=list)  # JSONL: "file, line N" of a cut last line, left out

    def text(self, errors: str = "strict") -> str:
        return self.data.decode("utf-8-sig", errors=errors)


class BadRecord(Exception):
    """A record that cannot be decoded: ``reason`` is its short class (counted), the message the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class NotJSON(Exception):
    """Raised by ``records`` for a plain-text container."""


def _read_all(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, a pipe, a FIFO or a socket, read in chunks and refused past ``limit``
    (an endless stream stops there); a device (``/dev/zero``, a terminal) is refused before any read."""
    with open(path, "rb", buffering=0) as fh:  # one read: a pipe has no second
        mode = os.fstat(fh.fileno()).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise TrajectoryFormatError(f"{path} is a device, not a file or a pipe: give a run file, a folder or a "
                                        "pipe (<(zcat run.jsonl.gz))")
        want = _CHUNK
        if stat.S_ISREG(mode):
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise TrajectoryFormatError(B.too_big(path, f"holds {size:,} bytes,", limit))
            want = size + 1  # one read, one buffer (more only if the file grows meanwhile)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = fh.read(want if not chunks else max(_CHUNK, total))  # doubling: few chunks to join
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise TrajectoryFormatError(B.too_big(path, "holds", limit))
            chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _expansion_cap(size: int, limit: int) -> int:
    """The most bytes a compressed input of ``size`` bytes may decode to: the budget, and no more than
    ``MAX_EXPANSION`` times its size past ``EXPANSION_FLOOR`` (a bomb is refused, not held)."""
    return min(limit, max(B.EXPANSION_FLOOR, B.MAX_EXPANSION * size))


def _bomb(path: Path, size: int, cap: int, limit: int) -> str:
    if cap >= limit:
        return B.too_big(path, "decompresses to", limit)
    return (f"{path}: a {size:,}-byte compressed file that decodes to more than {cap:,} bytes (over "
            f"{B.MAX_EXPANSION}x its size: a compression bomb?); decompress it yourself to read it")


def _gzip_members(path: Path, data: bytes, cap: int, limit: int, keep: bool) -> tuple[int, list[bytes]]:
    """(decompressed size, and the members' bytes when ``keep``) of a gzip input: refused past ``cap``, and
    when it ends before its end marker (a cut file, e.g. at a flush point)."""
    d = zlib.decompressobj(wbits=31)
    out: list[bytes] = []
    total = 0
    rest = data
    try:
        while True:
            chunk = d.decompress(rest, 0 if keep else _GZ_CHUNK)
            total += len(chunk)
            if total > cap:
                raise TrajectoryFormatError(_bomb(path, len(data), cap, limit))
            if keep:
                out.append(chunk)
            rest = d.unconsumed_tail
            if d.eof:  # concatenated gzip members (``cat a.gz b.gz``)
                rest = d.unused_data
                if not rest.lstrip(b"\0"):
                    return total, out
                d = zlib.decompressobj(wbits=31)
                continue
            if not chunk and not rest:  # all input read, no output left, and no end marker
                raise TrajectoryFormatError(f"{path}: the gzip stream ends before its end marker after "
                                            f"{total:,} bytes: the file is cut (still being written, or "
                                            "truncated); read it once it is complete")
    except zlib.error as exc:
        raise TrajectoryFormatError(f"{path}: not a readable gzip file ({exc})") from None


def _gunzip(path: Path, data: bytes, limit: int) -> bytes:
    cap = _expansion_cap(len(data), limit)
    _gzip_members(path, data, cap, limit, keep=False)  # first: sizes and the end marker, keeping nothing
    _, parts = _gzip_members(path, data, cap, limit, keep=True)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _sniff(path: Path, data: bytes) -> str:
    name = path.name.lower()
    name = name.removesuffix(".gz")
    if data[:4] == b"PAR1":
        return "parquet"
    head = data[:1 << 16].lstrip(b"\xef\xbb\xbf" + _WS)
    first = head[:1]
    if not first:
        return "empty"
    if name.endswith((".tsv", ".csv")):
        return "tsv" if name.endswith(".tsv") else "csv"
    if first == b"[":
        return "json-array"
    if first == b"{":
        nl = head.find(b"\n")
        try:
            json.loads((head[:nl] if nl >= 0 else head).decode("utf-8-sig"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return "json-object"  # a pretty-printed object (or a broken first line: reported later)
        return "jsonl"
    if name.endswith((".log", ".txt", ".out", ".err")):
        return "text"
    text = head.decode("utf-8", errors="replace")
    line1 = text.split("\n", 1)[0].strip()
    for sep, kind in (("\t", "tsv"), (",", "csv")):
        cols = line1.split(sep)
        if len(cols) >= 2 and all(_HEADER_FIELD.match(c.strip().strip('"')) for c in cols) and \
                _rows_agree(text, sep, len(cols)):
            return kind
    return "text"


def _rows_agree(text: str, sep: str, n: int) -> bool:
    """A header of ``n`` fields followed by rows of ``n`` fields (the first few, quotes respected): a table,
    not a log whose first line happens to hold a comma ("epoch 0, step 17")."""
    try:
        rows = list(itertools.islice(csv.reader(io.StringIO(text), delimiter=sep), 6))
    except csv.Error:
        return False
    rows = rows[:-1] if len(rows) > 2 else rows  # the last row of a 64 KB head may be cut
    return len(rows) >= 2 and all(len(r) == n for r in rows[1:] if r)


def load(path: str | os.PathLike[str]) -> Source:
    """Read ``path`` once (a file, a named pipe or ``/dev/fd/N``) within the input budget and tell its
    container."""
    p = Path(path)
    limit = B.max_bytes()
    data = _read_all(p, limit)
    compression = ""
    if data[:2] == b"\x1f\x8b":
        data, compression = _gunzip(p, data, limit), "gzip"
    return Source(p, data, _sniff(p, data), compression, limit=limit)


def json_containers(raw: bytes) -> int:
    """Objects and arrays in a JSON text (an upper bound: braces inside strings count, until the quick count
    passes the cap; then strings are removed and they are counted exactly)."""
    n = raw.count(b"{") + raw.count(b"[")
    if n <= B.MAX_CONTAINERS:
        return n
    bare = _JSON_STRING.sub(b"", raw)
    return bare.count(b"{") + bare.count(b"[")


def container_cap(size: int) -> int:
    """The most objects and arrays one JSON record (or document) of ``size`` bytes may hold: about a
    megabyte's worth, and one per 8 bytes past it (real records hold one per 20-100 bytes; 31M ``{}`` in
    93 MB would take 4.5 GB as Python objects)."""
    return B.MAX_CONTAINERS + size // 8


def check_containers(raw: bytes) -> str | None:
    """Why ``raw`` holds too many JSON containers to decode, or None."""
    if len(raw) <= 2 * B.MAX_CONTAINERS:
        return None  # (each container takes two bytes at least)
    n = json_containers(raw)
    cap = container_cap(len(raw))
    if n > cap:
        return f"holds {n:,} JSON objects and arrays in {len(raw):,} bytes, more than {cap:,}"
    return None


def decode_json(raw: bytes | str) -> Any:
    """One JSON value, or ``BadRecord`` saying why not."""
    if isinstance(raw, bytes):
        why = check_containers(raw)
        if why:
            raise BadRecord("too many JSON containers", why)
        try:
            raw = raw.decode("utf-8-sig")  # a byte-order mark is not JSON
        except UnicodeDecodeError as exc:
            raise BadRecord("not UTF-8", f"not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BadRecord("not valid JSON", f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadRecord("nested too deeply", "JSON nested too deeply") from None


def json_array(src: Source) -> Iterator[tuple[int, Any]]:
    """(index, element) of a top-level JSON array, decoded one element at a time."""
    why = check_containers(src.data)
    if why:
        raise TrajectoryFormatError(f"{src.path}: {why} (a JSON array's elements are read one at a time, but "
                                    "each as Python objects)")
    try:
        text = src.text()
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"{src.path}: not valid UTF-8 (byte {exc.start})") from None
    i = text.index("[") + 1
    n = len(text)
    k = 0
    ws = " \t\r\n"
    while True:
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == "]":
            return
        try:
            val, i = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(f"{src.path}, record {k}: not valid JSON ({exc.msg}, char {exc.pos})") \
                from None
        except RecursionError:
            raise TrajectoryFormatError(f"{src.path}, record {k}: JSON nested too deeply") from None
        yield k, val
        k += 1
        while i < n and text[i] in ws:
            i += 1
        if i < n and text[i] == ",":
            i += 1
        elif i < n and text[i] == "]":
            return
        else:
            raise TrajectoryFormatError(f"{src.path}, record {k}: expected ',' or ']' after a record "
                                        f"(char {i})")


def jsonl_lines(src: Source) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of the non-blank lines, without splitting the whole input at once; runs of
    blank lines are skipped by one regex search (C speed, however long). A last line cut mid-record (no
    newline after it, not valid JSON: a dump still being written) is left out and named in
    ``src.cut_lines``."""
    data = src.data
    n = len(data)
    start, lineno = 0, 1  # the line that holds ``start``
    while True:
        m = _NONBLANK.search(data, start)
        if m is None:
            return
        k = m.start()
        lineno += data.count(b"\n", start, k)
        ls = data.rfind(b"\n", start, k) + 1 or start
        e = data.find(b"\n", k)
        if e < 0:
            e = n
            if _is_cut(data[ls:]):
                where = f"{src.path}, line {lineno}"
                if where not in src.cut_lines:  # (detection reads the same source first)
                    src.cut_lines.append(where)
                return
        yield lineno, data[ls:e]
        start = e + 1
        lineno += 1


def _is_cut(last: bytes) -> bool:
    """Whether a last line without its newline is a record cut short (a whole one ends in ``}`` or ``]``)."""
    if last.rstrip()[-1:] in (b"}", b"]"):
        return False
    try:
        decode_json(last)
    except BadRecord as exc:
        return exc.reason in ("not valid JSON", "not UTF-8")
    return False


def _cell(v: Any) -> Any:
    if isinstance(v, str):
        s = v.strip()
        if s[:1] in ("[", "{") and s[-1:] in ("]", "}"):
            try:
                return json.loads(s)
            except (ValueError, RecursionError):
                return v
        return v
    return v


def table_rows(src: Source) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, record) of a CSV / TSV (header row first) or Parquet container."""
    if src.container == "parquet":
        from searchgym.diversity.readers.parquet import parquet_rows

        yield from parquet_rows(src)
        return
    try:
        text = src.text()
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"{src.path}: not valid UTF-8 (byte {exc.start})") from None
    csv.field_size_limit(1 << 30)
    reader = csv.reader(io.StringIO(text), delimiter="\t" if src.container == "tsv" else ",")
    try:
        header = next(reader, None)
        if header is None:
            return
        if len(header) > B.MAX_COLUMNS:
            raise TrajectoryFormatError(f"{src.path}: a header of {len(header):,} columns, more than "
                                        f"{B.MAX_COLUMNS:,}: not a table of episodes")
        keys = [str(k) for k in header]
        for row in reader:
            if row:  # (a blank line is no row)
                yield reader.line_num, {k: _cell(v) for k, v in zip(keys, row) if v}
    except csv.Error as exc:
        raise TrajectoryFormatError(f"{src.path}, line {reader.line_num}: not valid CSV ({exc})") from None
