"""Reading corpora: Search-R1 / FlashRAG jsonl, ``{id, title, text}`` jsonl, parquet, Hugging Face datasets.

Row order is index order (a dense row ``i`` is corpus row ``i``). Reading streams: ``iter_corpus`` holds one
line (or one parquet batch) at a time. Every problem names the file and the line (or byte offset) and says
how to fix it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from searchgym.errors import CorpusFormatError, DuplicateIdError
from searchgym.retrieval.base import Passage

FORMATS = ("jsonl", "parquet", "hf")


class CorpusNotFoundError(CorpusFormatError, FileNotFoundError):
    """The corpus path does not exist (or a hub dataset cannot be reached offline)."""


def parse_contents(contents: str) -> tuple[str, str]:
    """Split Search-R1 ``contents`` (``"Title"\\ntext``) into ``(title, text)``.

    The first line is the title, with its surrounding quotes removed; a single-line ``contents`` is all text.
    """
    head, sep, rest = contents.partition("\n")
    if not sep:
        return "", contents
    if len(head) >= 2 and head[0] == '"' and head[-1] == '"':
        head = head[1:-1]
    return head, rest


def passage_from_record(rec: Mapping[str, Any], *, path: str | None = None, line: int | None = None) -> Passage:
    """One corpus record -> Passage. Accepts ``{id, contents}`` or ``{id, title?, text}``."""
    if not isinstance(rec, Mapping):
        raise CorpusFormatError(
            f"expected a JSON object, got {type(rec).__name__}; each line must be "
            '{"id": ..., "contents": "\\"Title\\"\\ntext"} or {"id", "title", "text"}', path=path, line=line)
    pid = rec.get("id", rec.get("_id"))
    if pid is None or isinstance(pid, (dict, list, bool)):
        raise CorpusFormatError(
            f"missing or invalid 'id' (keys: {sorted(rec)[:8]}); every passage needs a string or integer id",
            path=path, line=line)
    if "contents" in rec and rec["contents"] is not None:
        contents = rec["contents"]
        if not isinstance(contents, str):
            raise CorpusFormatError(f"'contents' must be a string, got {type(contents).__name__}",
                                    path=path, line=line)
        title, text = parse_contents(contents)
    elif "text" in rec and rec["text"] is not None:
        text = rec["text"]
        title = rec.get("title") or ""
        if not isinstance(text, str) or not isinstance(title, str):
            raise CorpusFormatError("'title' and 'text' must be strings", path=path, line=line)
    else:
        raise CorpusFormatError(
            f"no 'contents' or 'text' field (keys: {sorted(rec)[:8]}); use the Search-R1 form "
            '{"id", "contents": "\\"Title\\"\\ntext"} or {"id", "title", "text"}', path=path, line=line)
    return Passage(str(pid), title, text)


def detect_format(path: str | Path) -> str:
    p = Path(path)
    if p.is_dir():
        if (p / "dataset_info.json").exists() or (p / "state.json").exists() or (p / "dataset_dict.json").exists():
            return "hf"
        if any(p.glob("*.parquet")):
            return "parquet"
        if any(p.glob("*.jsonl")) or any(p.glob("*.jsonl.gz")):
            return "jsonl"
        return "hf"
    name = p.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson")):
        return "jsonl"
    raise CorpusFormatError(
        "cannot tell the corpus format from the file name; name it .jsonl or .parquet or pass format=",
        path=str(path))


def _iter_jsonl_file(path: Path, on_bad: Callable[[CorpusFormatError], None] | None = None) -> Iterator[Passage]:
    """Passages of one jsonl file. A malformed line raises, or with ``on_bad`` is reported there and skipped."""
    opener = gzip.open if path.name.endswith(".gz") else open
    spath = str(path)
    offset = 0
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            start = offset
            offset += len(raw)
            try:
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise CorpusFormatError(
                        f"not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r}); re-encode the file as UTF-8, "
                        "e.g. iconv -f latin1 -t utf-8", path=spath, line=lineno, offset=start + exc.start) from None
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusFormatError(f"malformed JSON ({exc.msg} at column {exc.colno}); each line must "
                                            "be one JSON object", path=spath, line=lineno) from None
                except RecursionError:
                    raise CorpusFormatError("JSON nested too deeply; each line must be one flat JSON object",
                                            path=spath, line=lineno) from None
                p = passage_from_record(rec, path=spath, line=lineno)
            except CorpusFormatError as err:
                if on_bad is None:
                    raise
                on_bad(err)
                continue
            yield p


def _iter_parquet_file(path: Path, batch_size: int = 65_536) -> Iterator[Passage]:
    import pyarrow.parquet as pq

    spath = str(path)
    try:
        pf = pq.ParquetFile(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise CorpusFormatError(f"cannot read parquet ({exc}); the file is corrupt or not parquet",
                                path=spath) from None
    names = set(pf.schema_arrow.names)
    if "contents" in names:
        cols = ["id", "contents"]
    elif "text" in names:
        cols = ["id", "text"] + (["title"] if "title" in names else [])
    else:
        raise CorpusFormatError(f"parquet columns {sorted(names)} lack 'contents' or 'text'", path=spath)
    if "id" not in names:
        raise CorpusFormatError(f"parquet columns {sorted(names)} lack 'id'", path=spath)
    row = 0
    for batch in pf.iter_batches(batch_size=batch_size, columns=cols):
        d = batch.to_pydict()
        for rec in (dict(zip(d, vals)) for vals in zip(*d.values())):
            row += 1
            yield passage_from_record(rec, path=spath, line=row)


def _iter_hf(name_or_path: str, split: str | None = None) -> Iterator[Passage]:
    try:
        import datasets
    except ImportError as exc:
        raise CorpusFormatError("reading a Hugging Face dataset needs `pip install datasets`",
                                path=name_or_path) from exc
    p = Path(name_or_path)
    try:
        if p.is_dir() and ((p / "dataset_info.json").exists() or (p / "state.json").exists()
                           or (p / "dataset_dict.json").exists()):
            ds = datasets.load_from_disk(str(p))
        elif p.exists():
            ds = datasets.load_dataset(str(p))
        else:
            ds = datasets.load_dataset(name_or_path, split=split)
    except (FileNotFoundError, ConnectionError, OSError, ValueError) as exc:
        raise CorpusNotFoundError(
            f"cannot load the Hugging Face dataset ({type(exc).__name__}: {str(exc)[:200]}); give a local "
            "path, or go online for a hub name (HF_HUB_OFFLINE must be unset)", path=name_or_path) from None
    if isinstance(ds, (datasets.DatasetDict, dict)):
        keys = list(ds)
        pick = split or ("train" if "train" in keys else keys[0] if len(keys) == 1 else None)
        if pick is None or pick not in ds:
            raise CorpusFormatError(f"the dataset has splits {keys}; choose one with split=", path=name_or_path)
        ds = ds[pick]
    for row, rec in enumerate(ds, 1):
        yield passage_from_record(rec, path=name_or_path, line=row)


def _files_in(path: Path, fmt: str) -> list[Path]:
    if path.is_file():
        return [path]
    pats = ("*.parquet",) if fmt == "parquet" else ("*.jsonl", "*.jsonl.gz")
    return sorted(f for pat in pats for f in path.glob(pat))


def _check_unique(passages: Iterable[Passage], source: str) -> Iterator[Passage]:
    seen: dict[str, int] = {}
    for n, p in enumerate(passages, 1):
        first = seen.setdefault(p.id, n)
        if first != n:
            raise DuplicateIdError(
                f"duplicate passage id {p.id!r} (rows {first} and {n}); ids must be unique — deduplicate the "
                "corpus or renumber the ids", path=source, line=n)
        yield p


def iter_corpus(path: str | Path, *, format: str | None = None, split: str | None = None,
                on_bad: Callable[[CorpusFormatError], None] | None = None,
                check_unique: bool = True) -> Iterator[Passage]:
    """Stream the passages of a corpus file, a directory of shards, or a Hugging Face dataset.

    ``on_bad``: called with the error of each malformed jsonl line, which is then skipped (lenient reading).
    ``check_unique=False`` skips the duplicate-id check, whose set of ids grows with the corpus (the sharded
    build checks ids itself in constant memory per passage).
    """
    fmt = format
    if fmt is not None and fmt not in FORMATS:
        raise CorpusFormatError(f"unknown format {fmt!r}; choose one of {FORMATS}", path=str(path))
    p = Path(path)
    if fmt != "hf" and not p.exists():
        raise CorpusNotFoundError("no such corpus file or directory; check the path", path=str(path))
    fmt = fmt or detect_format(p)
    unique = _check_unique if check_unique else (lambda it, _src: it)
    if fmt == "hf":
        return unique(_iter_hf(str(path), split), str(path))

    def gen() -> Iterator[Passage]:
        files = _files_in(p, fmt)
        if not files:
            raise CorpusNotFoundError(f"no {fmt} files in this directory", path=str(p))
        for f in files:
            yield from (_iter_parquet_file(f) if fmt == "parquet" else _iter_jsonl_file(f, on_bad))

    return unique(gen(), str(path))


class CorpusList(list[Passage]):
    """``list[Passage]`` plus ``skipped`` / ``errors``: the malformed lines a lenient load left out."""

    skipped: int = 0
    errors: list[str]


def load_corpus(path_or_name: str | Path, *, format: str | None = None, split: str | None = None,
                lenient: bool = False) -> list[Passage]:
    """Read a whole corpus into memory. A path that does not exist and looks like ``owner/name`` is tried as a
    Hugging Face hub dataset (needs network; offline it raises ``CorpusNotFoundError``).

    ``lenient=True`` skips malformed jsonl lines and counts them (``result.skipped``, ``result.errors``).
    """
    s = str(path_or_name)
    if format is None and not Path(s).exists() and s.count("/") == 1 and not s.startswith((".", "/")) \
            and not s.endswith((".jsonl", ".parquet", ".json", ".gz")):
        format = "hf"
    out = CorpusList()
    out.errors = []

    def bad(err: CorpusFormatError) -> None:
        out.skipped += 1
        if len(out.errors) < 20:
            out.errors.append(str(err))

    out.extend(iter_corpus(path_or_name, format=format, split=split, on_bad=bad if lenient else None))
    return out


def fingerprint_update(h: Any, p: Passage) -> None:
    """Feed one passage to a sha256 the way ``corpus_fingerprint`` does (for streaming builds)."""
    h.update(p.id.encode("utf-8"))
    h.update(b"\x00")
    h.update(p.title.encode("utf-8"))
    h.update(b"\x00")
    h.update(p.text.encode("utf-8"))
    h.update(b"\x1e")


def corpus_fingerprint(passages: Iterable[Passage]) -> str:
    """sha256 over the ids and contents of the passages, in order (identifies the corpus an index was built on)."""
    h = hashlib.sha256()
    for p in passages:
        fingerprint_update(h, p)
    return "sha256:" + h.hexdigest()


def write_jsonl(passages: Iterable[Passage], path: str | Path) -> Path:
    """Write passages in the Search-R1 form (atomically)."""
    import os

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(p.to_search_r1(), ensure_ascii=False) + "\n" for p in passages)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
