"""Containers: a file (or a pipe) -> records.

The input is read exactly once (so ``analyze <(zcat run.jsonl.gz)`` works: a pipe cannot be read twice) into
a ``Source``; detection and reading then work on its bytes. gzip is undone here (bounded: see
``MAX_DECOMPRESSED``). Containers: JSONL, a JSON array (streamed element by element, never parsed whole), a
JSON object (or one holding the list of episodes under some key), CSV / TSV (a header row; cells that hold
JSON lists or objects are decoded), Parquet (row batches), and plain text (logs; see ``logs``).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.errors import TrajectoryFormatError

# The most bytes a compressed input may expand to (a gzip bomb is refused, not decompressed).
MAX_DECOMPRESSED = int(os.environ.get("SEARCHGYM_ANALYZE_MAX_BYTES", str(4 << 30)))
_DECODER = json.JSONDecoder()
_WS = b" \t\r\n"
_HEADER_FIELD = re.compile(r"^[A-Za-z_][\w .\-/]{0,60}$")


@dataclass
class Source:
    """One input's bytes (decompressed) and the container they hold."""

    path: Path
    data: bytes
    container: str          # jsonl | json-array | json-object | csv | tsv | parquet | text | empty
    compression: str = ""   # gzip or ""

    def text(self, errors: str = "strict") -> str:
        return self.data.decode("utf-8-sig", errors=errors)


class BadRecord(Exception):
    """A record that cannot be decoded: ``reason`` is its short class (counted), the message the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class NotJSON(Exception):
    """Raised by ``records`` for a plain-text container."""


def _gunzip(path: Path, data: bytes) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = bytearray()
    rest = data
    try:
        while rest:
            chunk = d.decompress(rest, MAX_DECOMPRESSED + 1 - len(out))
            out += chunk
            if len(out) > MAX_DECOMPRESSED:
                raise TrajectoryFormatError(
                    f"{path}: decompresses to more than {MAX_DECOMPRESSED} bytes; decompress it yourself or "
                    "raise SEARCHGYM_ANALYZE_MAX_BYTES")
            rest = d.unconsumed_tail
            if d.eof:  # concatenated gzip members (``cat a.gz b.gz``)
                rest = d.unused_data
                if rest.lstrip(b"\0"):
                    d = zlib.decompressobj(wbits=31)
                else:
                    rest = b""
    except zlib.error as exc:
        raise TrajectoryFormatError(f"{path}: not a readable gzip file ({exc})") from None
    return bytes(out)


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
    """Read ``path`` once (a file, a named pipe or ``/dev/fd/N``) and tell its container."""
    p = Path(path)
    with open(p, "rb") as fh:  # one read: a pipe has no second
        data = fh.read()
    compression = ""
    if data[:2] == b"\x1f\x8b":
        data, compression = _gunzip(p, data), "gzip"
    return Source(p, data, _sniff(p, data), compression)


def decode_json(raw: bytes | str) -> Any:
    """One JSON value, or ``BadRecord`` saying why not."""
    if isinstance(raw, bytes):
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
    """(line number, raw line) of the non-blank lines, without splitting the whole input at once."""
    data = src.data
    start, lineno, n = 0, 0, len(data)
    while start < n:
        e = data.find(b"\n", start)
        e = n if e < 0 else e
        lineno += 1
        raw = data[start:e]
        start = e + 1
        if raw.strip():
            yield lineno, raw


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
        try:
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            pf = pq.ParquetFile(io.BytesIO(src.data))
            k = 0
            for batch in pf.iter_batches(batch_size=1024):
                for row in batch.to_pylist():
                    yield k, {str(key): _cell(val) for key, val in row.items()}
                    k += 1
        except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError
            raise TrajectoryFormatError(f"{src.path}: not a readable Parquet file ({exc})") from None
        return
    try:
        text = src.text()
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"{src.path}: not valid UTF-8 (byte {exc.start})") from None
    csv.field_size_limit(1 << 30)
    reader = csv.DictReader(io.StringIO(text), delimiter="\t" if src.container == "tsv" else ",")
    try:
        for row in reader:
            yield reader.line_num, {str(k): _cell(v) for k, v in row.items() if k is not None}
    except csv.Error as exc:
        raise TrajectoryFormatError(f"{src.path}, line {reader.line_num}: not valid CSV ({exc})") from None
