"""Parquet rows within the input budget.

Text columns are read dictionary-encoded, so that the decoded size of a batch is known before a row of it is
built (a 1,425-byte file may hold one 4 MB string repeated in 100,000 rows: 400 GB once decoded). A batch is
turned into Python rows a slice at a time (at most ``BATCH_BYTES`` decoded), and the decoded bytes of the whole
file count against the budget (``budget``), like a gzip's. Arrow's errors (an unknown time zone, a date out of
range, an encoding it does not implement, a corrupt page) are caught where rows are produced and become one
``TrajectoryFormatError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from searchgym.errors import TrajectoryFormatError

BATCH_ROWS = 1024
BATCH_BYTES = 32 << 20


def _dense_bytes(arr: Any) -> int:
    """Bytes of ``arr`` once decoded: a dictionary column's values are counted once per row that uses them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_dictionary(t):
        values = arr.dictionary
        if pa.types.is_string(values.type) or pa.types.is_binary(values.type) or \
                pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
            lens = pc.binary_length(values)
        else:
            lens = pa.array([values.nbytes // max(len(values), 1)] * len(values), pa.int64())
        total = pc.sum(pc.take(lens, arr.indices)).as_py() or 0
        return int(total) + arr.indices.nbytes
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _dense_bytes(arr.flatten()) + len(arr) * 8
    if pa.types.is_struct(t):
        return sum(_dense_bytes(arr.field(i)) for i in range(t.num_fields)) + len(arr)
    if pa.types.is_map(t):
        return _dense_bytes(arr.keys) + _dense_bytes(arr.items) + len(arr) * 8
    return int(arr.nbytes)


def _text_paths(pf: Any) -> list[str]:
    """The column paths to read dictionary-encoded: every byte-array leaf (strings, binaries)."""
    md = pf.metadata
    return [md.schema.column(i).path for i in range(md.num_columns)
            if md.schema.column(i).physical_type == "BYTE_ARRAY"]


def _open(data: bytes) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    probe = pq.ParquetFile(pa.BufferReader(data))
    return pq.ParquetFile(pa.BufferReader(data), read_dictionary=_text_paths(probe))


def _row_slices(src: Any) -> Iterator[list[dict[str, Any]]]:
    """Lists of rows (dicts), each list at most ``BATCH_BYTES`` decoded; the file's total within the budget."""
    from searchgym.diversity.readers.containers import _bomb, _expansion_cap

    pf = _open(src.data)
    cap = _expansion_cap(len(src.data), src.limit)
    md = pf.metadata  # the row groups' own (encoded) sizes first: a file that states more is refused unread
    if sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups)) > cap:
        raise TrajectoryFormatError(_bomb(src.path, len(src.data), cap, src.limit))
    total = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS):
        size = sum(_dense_bytes(c) for c in batch.columns)
        total += size
        if total > cap:
            raise TrajectoryFormatError(_bomb(src.path, len(src.data), cap, src.limit))
        n = batch.num_rows
        step = n if size <= BATCH_BYTES else max(1, n * BATCH_BYTES // max(size, 1))
        for off in range(0, n, step):
            yield batch.slice(off, step).to_pylist()


def parquet_rows(src: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, record) of a Parquet ``Source``."""
    from searchgym.diversity.readers.containers import _cell

    rows = _row_slices(src)
    k = 0
    while True:
        try:
            chunk = next(rows, None)
        except TrajectoryFormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - Arrow raises many kinds (ArrowInvalid, ArrowNotImplementedError,
            # OverflowError for a date out of range, a time zone it cannot find): all mean an unreadable file
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise TrajectoryFormatError(f"{src.path}: not a readable Parquet file, at row {k} "
                                        f"({type(exc).__name__}: {why})") from None
        if chunk is None:
            return
        for row in chunk:
            yield k, {str(key): _cell(val) for key, val in row.items()}
            k += 1
