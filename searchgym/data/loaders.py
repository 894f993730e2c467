"""Loaders for real QA data: Search-R1 / verl parquet, FlashRAG jsonl, HotpotQA, MuSiQue, 2WikiMultihopQA,
any Hugging Face dataset, and the procedural world by name.

Every loader returns a :class:`QAList` (a ``list[QAExample]`` with a ``report``). Strict mode (the
default) raises :class:`~searchgym.errors.CorpusFormatError` naming the file and the line (the row, for
parquet) of the first malformed record; ``lenient=True`` skips such records and counts them in
``report.skipped``.

Files that carry their own paragraphs (HotpotQA, MuSiQue, 2Wiki) can also be pooled into one
deduplicated corpus with :func:`pooled_corpus`.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.data.qa import QAExample
from searchgym.errors import ConfigError, CorpusFormatError, DatasetUnavailableError, DuplicateIdError
from searchgym.retrieval.base import Passage

ANSWER_SPLIT = "<|answer_split|>"
FORMATS = ("search_r1", "flashrag", "hotpotqa", "musique", "2wiki", "ircot", "world", "hf")
PARAGRAPH_FORMATS = ("hotpotqa", "musique", "2wiki", "ircot")
# What a converter may raise on a record of the wrong shape (beyond _Bad): all become malformed records.
_RECORD_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError)
TWOWIKI_TYPES = {"compositional", "inference", "bridge_comparison"}
_HOP_PREFIX = re.compile(r"^(\d)hop\d*$")
_MAX_ERRORS_KEPT = 20


class QAFileNotFoundError(CorpusFormatError, FileNotFoundError):
    """A QA file or directory that does not exist."""


class _Bad(Exception):
    """A malformed record (internal: becomes CorpusFormatError or a counted skip)."""


@dataclass
class LoadReport:
    """What a load did: how many records were read and how many malformed ones were skipped (lenient)."""

    source: str
    format: str
    loaded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)   # the first few skip reasons, "file, line N: why"

    def note(self, message: str) -> None:
        self.skipped += 1
        if len(self.errors) < _MAX_ERRORS_KEPT:
            self.errors.append(message)


class QAList(list):
    """A ``list[QAExample]`` that also carries the :class:`LoadReport` of the load that made it."""

    report: LoadReport

    def __init__(self, items: Iterable[QAExample] = (), report: LoadReport | None = None):
        super().__init__(items)
        self.report = report or LoadReport(source="", format="")


# ------------------------------------------------------------------------------------------------
# reading records
# ------------------------------------------------------------------------------------------------
def _open_bytes(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _base_suffix(path: Path) -> str:
    name = path.name.removesuffix(".gz")
    return Path(name).suffix.lower()


def _read_all(path: Path) -> bytes:
    try:
        with _open_bytes(path) as f:
            return f.read()
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise CorpusFormatError(f"cannot read the file ({exc}); it is truncated or not what its name says",
                                path=str(path)) from None


def _decode(data: bytes, path: Path, first_line: int = 1) -> str:
    """UTF-8 text of ``data``, or a CorpusFormatError naming the line of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        raise CorpusFormatError(f"not valid UTF-8 (byte {data[exc.start:exc.start + 1]!r}); re-encode the file "
                                "as UTF-8 (e.g. iconv -f latin1 -t utf-8)", path=str(path), line=line) from None


def _iter_json_records(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, record)`` from a jsonl file, a JSON array file, or one JSON object (``{"data": [...]}``).

    A jsonl line that is not valid JSON or UTF-8, or nests too deeply, yields ``(line, _Bad)`` so the caller
    can skip or raise. A JSON array or object file is one record stream: damage there raises
    CorpusFormatError naming the line.
    """
    try:
        with _open_bytes(path) as f:
            head = f.read(4096).decode("utf-8", errors="replace").lstrip()
    except (OSError, EOFError) as exc:
        raise CorpusFormatError(f"cannot read the file ({exc}); it is truncated or not what its name says",
                                path=str(path)) from None
    if head.startswith("["):
        yield from _iter_json_array(path, _decode(_read_all(path), path))
        return
    if head.startswith("{") and _base_suffix(path) == ".json":
        text = _decode(_read_all(path), path)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None  # more than one object: jsonl under a .json name
        except RecursionError:
            raise CorpusFormatError("JSON nested too deeply to read", path=str(path), line=1) from None
        if isinstance(obj, dict):
            data = obj.get("data")
            if isinstance(data, list):
                for i, rec in enumerate(data):
                    yield i + 1, rec
            else:
                yield 1, obj
            return
    try:
        with _open_bytes(path) as f:
            for n, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    yield n, _Bad(f"not valid UTF-8 (byte {raw[exc.start:exc.start + 1]!r} at column "
                                  f"{exc.start + 1}); re-encode the file as UTF-8")
                    continue
                if not line.strip():
                    continue
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield n, _Bad(f"not valid JSON ({exc.msg} at column {exc.colno})")
                except RecursionError:
                    yield n, _Bad("JSON nested too deeply")
    except (OSError, EOFError) as exc:
        raise CorpusFormatError(f"cannot read the file ({exc}); it is truncated or not what its name says",
                                path=str(path)) from None


def _iter_json_array(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    dec = json.JSONDecoder()
    ws = re.compile(r"\s*")
    pos = ws.match(text, 0).end() + 1  # after "["
    line, counted = 1, 0
    while True:
        pos = ws.match(text, pos).end()
        if pos >= len(text):
            raise CorpusFormatError("unterminated JSON array (missing ']')", path=str(path),
                                    line=text.count("\n") + 1)
        if text[pos] == "]":
            return
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise CorpusFormatError(f"not valid JSON ({exc.msg}); fix the file or export it as jsonl",
                                    path=str(path), line=exc.lineno) from None
        except RecursionError:
            raise CorpusFormatError("JSON nested too deeply; fix the file or export it as jsonl",
                                    path=str(path), line=line) from None
        yield line, obj
        pos = ws.match(text, end).end()
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos < len(text) and text[pos] != "]":
            raise CorpusFormatError("expected ',' or ']' between array elements", path=str(path),
                                    line=text.count("\n", 0, pos) + 1)


def _iter_parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise CorpusFormatError(f"not a readable parquet file ({exc})", path=str(path)) from None
    row = 0
    for batch in pf.iter_batches(batch_size=4096):
        for rec in batch.to_pylist():
            row += 1
            yield row, rec


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    if _base_suffix(path) == ".parquet":
        return _iter_parquet_rows(path)
    return _iter_json_records(path)


def _first_record(path: Path) -> Any:
    for _, rec in _records(path):
        if not isinstance(rec, _Bad):
            return rec
    return None


# ------------------------------------------------------------------------------------------------
# field helpers
# ------------------------------------------------------------------------------------------------
def _str(rec: Mapping, key: str, *, required: bool = True) -> str | None:
    v = rec.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        if required:
            raise _Bad(f"missing or empty {key!r}")
        return None
    if not isinstance(v, (str, int)):
        raise _Bad(f"{key!r} must be a string, got {type(v).__name__}")
    return str(v)


def _answer_list(v: Any, key: str) -> list[str]:
    """Answers from a list or a string; ``<|answer_split|>``-joined strings are split."""
    if v is None:
        raise _Bad(f"missing {key!r}")
    items = [v] if isinstance(v, (str, int, float)) else v
    if not isinstance(items, (list, tuple)):
        try:
            items = list(items)  # numpy arrays from some parquet readers
        except TypeError:
            raise _Bad(f"{key!r} must be a list of strings or a string") from None
    out: list[str] = []
    for a in items:
        if not isinstance(a, (str, int, float)):
            raise _Bad(f"{key!r} must hold strings, found {type(a).__name__}")
        for part in str(a).split(ANSWER_SPLIT):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    if not out:
        raise _Bad(f"{key!r} holds no answer")
    return out


def _question_from_prompt(prompt: Any) -> str:
    """The question inside a Search-R1 chat prompt: the text after the last ``Question:``."""
    if isinstance(prompt, str):
        content = prompt
    else:
        try:
            msgs = list(prompt)
        except TypeError:
            raise _Bad("'prompt' must be a list of chat messages or a string") from None
        users = [m for m in msgs if isinstance(m, Mapping) and m.get("role", "user") == "user"]
        if not users or not isinstance(users[-1].get("content"), str):
            raise _Bad("'prompt' has no user message with string content")
        content = users[-1]["content"]
    i = content.rfind("Question:")
    q = content[i + len("Question:"):] if i >= 0 else content
    q = q.strip()
    if not q:
        raise _Bad("'prompt' holds an empty question")
    return q


# ------------------------------------------------------------------------------------------------
# converters: one record -> QAExample (+ paragraphs for the multi-hop formats)
# ------------------------------------------------------------------------------------------------
Paragraph = tuple[str, str, bool]   # (title, text, is_supporting)


def _convert_search_r1(rec: Mapping, n: int, stem: str) -> QAExample:
    if not isinstance(rec, Mapping):
        raise _Bad("record is not an object")
    extra = rec.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        raise _Bad("'extra_info' must be an object")
    question = _str(rec, "question", required=False)
    if question is None:
        if rec.get("prompt") is None:
            raise _Bad("neither 'question' nor 'prompt' is present")
        question = _question_from_prompt(rec["prompt"])
    if rec.get("golden_answers") is not None:
        answers = _answer_list(rec["golden_answers"], "golden_answers")
    else:
        rm = rec.get("reward_model")
        if not isinstance(rm, Mapping):
            raise _Bad("neither 'golden_answers' nor 'reward_model' is present")
        gt = rm.get("ground_truth")
        target = gt.get("target") if isinstance(gt, Mapping) else gt
        answers = _answer_list(target, "reward_model.ground_truth.target")
    qid = _str(rec, "id", required=False)
    if qid is None:
        src = rec.get("data_source") or stem
        qid = f"{src}-{extra.get('split', 'row')}-{extra.get('index', n - 1)}"
    meta: dict[str, Any] = {}
    if isinstance(rec.get("metadata"), Mapping):
        meta.update(rec["metadata"])
    for k, v in extra.items():
        if k != "supporting_ids" and v is not None:
            meta[k] = list(v) if isinstance(v, tuple) else v
    for k in ("data_source", "ability"):
        if rec.get(k) is not None:
            meta[k] = rec[k]
    meta.setdefault("source", rec.get("data_source") or "search_r1")
    sup = extra.get("supporting_ids") or []
    return QAExample(id=qid, question=question, answers=answers, supporting_ids=[str(s) for s in sup],
                     metadata=meta)


def _convert_flashrag(rec: Mapping, n: int, stem: str) -> QAExample:
    if not isinstance(rec, Mapping):
        raise _Bad("record is not an object")
    question = _str(rec, "question")
    assert question is not None
    if "golden_answers" in rec:
        answers = _answer_list(rec["golden_answers"], "golden_answers")
    elif "answers" in rec:
        answers = _answer_list(rec["answers"], "answers")
    else:
        answers = _answer_list(rec.get("answer"), "answer")
    qid = _str(rec, "id", required=False) or f"{stem}-{n - 1}"
    meta: dict[str, Any] = dict(rec["metadata"]) if isinstance(rec.get("metadata"), Mapping) else {}
    meta.setdefault("source", "flashrag")
    sup = meta.pop("supporting_ids", None) or rec.get("supporting_ids") or []
    return QAExample(id=qid, question=question, answers=answers, supporting_ids=[str(s) for s in sup],
                     metadata=meta)


def _paragraph_text(sents: Any) -> str:
    if isinstance(sents, str):
        return " ".join(sents.split())
    if not isinstance(sents, (list, tuple)) or not all(isinstance(s, str) for s in sents):
        raise _Bad("a context paragraph must be [title, [sentences]]")
    return " ".join(s.strip() for s in sents if s.strip())


def _context_paragraphs(rec: Mapping) -> tuple[list[Paragraph], list[str], list[list]]:
    """HotpotQA / 2Wiki ``context`` + ``supporting_facts`` -> paragraphs, supporting titles, facts."""
    ctx = rec.get("context")
    facts = rec.get("supporting_facts")
    if not isinstance(ctx, (list, tuple)) or not ctx:
        raise _Bad("missing or empty 'context'")
    if not isinstance(facts, (list, tuple)):
        raise _Bad("missing 'supporting_facts'")
    if isinstance(ctx, Mapping):  # pragma: no cover - HF's columnar variant handled in _hf_row
        raise _Bad("'context' must be a list")
    sup_titles: list[str] = []
    clean_facts: list[list] = []
    for f in facts:
        if not isinstance(f, (list, tuple)) or len(f) != 2 or not isinstance(f[0], str):
            raise _Bad("a supporting fact must be [title, sentence index]")
        clean_facts.append([f[0], int(f[1])])
        if f[0] not in sup_titles:
            sup_titles.append(f[0])
    paras: list[Paragraph] = []
    for item in ctx:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str):
            raise _Bad("a context paragraph must be [title, [sentences]]")
        paras.append((item[0], _paragraph_text(item[1]), item[0] in sup_titles))
    return paras, sup_titles, clean_facts


def _convert_hotpot_like(rec: Mapping, n: int, stem: str, source: str) -> tuple[QAExample, list[Paragraph]]:
    if not isinstance(rec, Mapping):
        raise _Bad("record is not an object")
    question = _str(rec, "question")
    answers = _answer_list(rec.get("answer"), "answer")
    paras, sup_titles, facts = _context_paragraphs(rec)
    qid = _str(rec, "_id", required=False) or _str(rec, "id", required=False) or f"{stem}-{n - 1}"
    meta: dict[str, Any] = {"source": source, "family": rec.get("type"), "hops": max(1, len(sup_titles)),
                            "supporting_titles": sup_titles, "supporting_facts": facts}
    if rec.get("level") is not None:
        meta["level"] = rec["level"]
    if rec.get("evidences") is not None:
        meta["evidences"] = rec["evidences"]
    assert question is not None
    return QAExample(id=qid, question=question, answers=answers, metadata=meta), paras


def _convert_musique(rec: Mapping, n: int, stem: str) -> tuple[QAExample, list[Paragraph]]:
    if not isinstance(rec, Mapping):
        raise _Bad("record is not an object")
    question = _str(rec, "question")
    answers = _answer_list(rec.get("answer"), "answer")
    for alias in rec.get("answer_aliases") or []:
        if isinstance(alias, str) and alias.strip() and alias.strip() not in answers:
            answers.append(alias.strip())
    ps = rec.get("paragraphs")
    if not isinstance(ps, (list, tuple)) or not ps:
        raise _Bad("missing or empty 'paragraphs'")
    paras: list[Paragraph] = []
    for p in ps:
        if not isinstance(p, Mapping) or not isinstance(p.get("paragraph_text"), str):
            raise _Bad("a paragraph must be an object with 'title' and 'paragraph_text'")
        paras.append((str(p.get("title") or ""), " ".join(p["paragraph_text"].split()),
                      bool(p.get("is_supporting"))))
    sup_titles = [t for t, _, s in paras if s]
    decomp = rec.get("question_decomposition")
    if isinstance(decomp, list):  # hop order when the decomposition names its paragraphs
        hop_titles = [paras[d["paragraph_support_idx"]][0] for d in decomp if isinstance(d, Mapping)
                      and isinstance(d.get("paragraph_support_idx"), int)
                      and 0 <= d["paragraph_support_idx"] < len(paras)]
        sup_titles = list(dict.fromkeys(hop_titles + sup_titles))
    qid = _str(rec, "id", required=False) or f"{stem}-{n - 1}"
    prefix = qid.split("__", 1)[0]
    m = _HOP_PREFIX.match(prefix)
    hops = len(decomp) if isinstance(decomp, list) and decomp else (int(m.group(1)) if m else None)
    meta: dict[str, Any] = {"source": "musique", "family": prefix if m else "musique", "hops": hops,
                            "answerable": rec.get("answerable", True),
                            "supporting_titles": sup_titles}
    assert question is not None
    return QAExample(id=qid, question=question, answers=answers, metadata=meta), paras


def _ircot_answers(objs: Any) -> list[str]:
    """IRCoT ``answers_objects``: ``[{"number": "", "date": {"day", "month", "year"}, "spans": [...]}]``."""
    if not isinstance(objs, (list, tuple)) or not objs:
        raise _Bad("missing or empty 'answers_objects'")
    out: list[str] = []
    for o in objs:
        if not isinstance(o, Mapping):
            raise _Bad("each of 'answers_objects' must be an object with 'number', 'date' or 'spans'")
        spans = o.get("spans") or []
        if not isinstance(spans, (list, tuple)):
            raise _Bad("'answers_objects[].spans' must be a list of strings")
        cands: list[Any] = list(spans)
        if o.get("number") not in (None, ""):
            cands.append(o["number"])
        date = o.get("date")
        if isinstance(date, Mapping):
            parts = [str(date.get(k) or "").strip() for k in ("day", "month", "year")]
            if any(parts):
                cands.append(" ".join(x for x in parts if x))
        for a in cands:
            if not isinstance(a, (str, int, float)) or isinstance(a, bool):
                raise _Bad(f"'answers_objects' must hold strings, found {type(a).__name__}")
            a = str(a).strip()
            if a and a not in out:
                out.append(a)
    if not out:
        raise _Bad("'answers_objects' holds no answer")
    return out


def _convert_ircot(rec: Mapping, n: int, stem: str) -> tuple[QAExample, list[Paragraph]]:
    """HotpotQA (and 2Wiki/MuSiQue) in IRCoT's processed layout: ``question_id``, ``question_text``,
    ``answers_objects``, ``contexts`` (``idx``, ``title``, ``paragraph_text``, ``is_supporting``)."""
    if not isinstance(rec, Mapping):
        raise _Bad("record is not an object")
    question = _str(rec, "question_text")
    answers = _ircot_answers(rec.get("answers_objects"))
    ctx = rec.get("contexts")
    if not isinstance(ctx, (list, tuple)) or not ctx:
        raise _Bad("missing or empty 'contexts'")
    paras: list[Paragraph] = []
    for c in ctx:
        if not isinstance(c, Mapping) or not isinstance(c.get("paragraph_text"), str):
            raise _Bad("each of 'contexts' must be an object with 'title' and 'paragraph_text'")
        title = c.get("title") or ""
        if not isinstance(title, str):
            raise _Bad("'contexts[].title' must be a string")
        paras.append((title, " ".join(c["paragraph_text"].split()), bool(c.get("is_supporting"))))
    sup_titles = list(dict.fromkeys(t for t, _, sup in paras if sup))
    qid = _str(rec, "question_id", required=False) or _str(rec, "id", required=False) or f"{stem}-{n - 1}"
    meta: dict[str, Any] = {"source": "ircot", "family": rec.get("type") or "ircot",
                            "hops": max(1, len(sup_titles)), "supporting_titles": sup_titles}
    assert question is not None
    return QAExample(id=qid, question=question, answers=answers, metadata=meta), paras


CONVERTERS: dict[str, Callable[[Mapping, int, str], Any]] = {
    "search_r1": _convert_search_r1,
    "flashrag": _convert_flashrag,
    "hotpotqa": lambda r, n, s: _convert_hotpot_like(r, n, s, "hotpotqa"),
    "2wiki": lambda r, n, s: _convert_hotpot_like(r, n, s, "2wiki"),
    "musique": _convert_musique,
    "ircot": _convert_ircot,
}


# ------------------------------------------------------------------------------------------------
# detection
# ------------------------------------------------------------------------------------------------
def format_of_record(rec: Any) -> str | None:
    """Guess a QA format from one record's keys (None if it looks like no QA format)."""
    if not isinstance(rec, Mapping):
        return None
    keys = set(rec)
    if "question_text" in keys and ("answers_objects" in keys or "contexts" in keys):
        return "ircot"
    if "paragraphs" in keys and "question" in keys:
        return "musique"
    if "context" in keys and "supporting_facts" in keys:
        if "evidences" in keys or rec.get("type") in TWOWIKI_TYPES:
            return "2wiki"
        return "hotpotqa"
    if "prompt" in keys or "reward_model" in keys:
        return "search_r1"
    if "question" in keys and keys & {"golden_answers", "answers", "answer"}:
        return "flashrag"
    return None


def detect_format(path: str | Path) -> str:
    """The QA format of a file: ``search_r1``, ``flashrag``, ``hotpotqa``, ``musique``, ``2wiki`` or ``ircot``."""
    p = Path(path)
    if not p.exists():
        raise QAFileNotFoundError("no such file; check the path", path=str(p))
    if _base_suffix(p) == ".parquet":
        return "search_r1"
    if _base_suffix(p) not in (".json", ".jsonl", ".jsonlines"):
        raise CorpusFormatError("unknown QA file type; expected .parquet, .json or .jsonl (optionally .gz)",
                                path=str(p))
    rec = _first_record(p)
    fmt = format_of_record(rec)
    if fmt is None:
        if isinstance(rec, Mapping) and "contents" in rec:
            raise CorpusFormatError("this is a corpus file (it has 'contents'), not a QA file; load it with "
                                    "searchgym.retrieval.load_corpus", path=str(p))
        keys = sorted(rec)[:12] if isinstance(rec, Mapping) else type(rec).__name__
        raise CorpusFormatError(f"cannot tell the QA format from the first record (keys {keys}); pass "
                                f"format= one of {', '.join(FORMATS[:6])}", path=str(p), line=1)
    return fmt


# ------------------------------------------------------------------------------------------------
# loading files
# ------------------------------------------------------------------------------------------------
def _iter_examples(path: Path, fmt: str, report: LoadReport, lenient: bool
                   ) -> Iterator[tuple[QAExample, list[Paragraph] | None]]:
    conv = CONVERTERS[fmt]
    stem = path.name.split(".")[0]
    for n, rec in _records(path):
        try:
            if isinstance(rec, _Bad):
                raise rec
            try:
                got = conv(rec, n, stem)
            except _RECORD_ERRORS as exc:
                raise _Bad(f"a field has the wrong type or shape ({type(exc).__name__}: {str(exc)[:120]})") \
                    from None
        except _Bad as exc:
            where = "row" if _base_suffix(path) == ".parquet" else "line"
            if not lenient:
                what = f"record (row {n})" if where == "row" else "record"
                raise CorpusFormatError(f"malformed {fmt} {what}: {exc}; fix it or load with "
                                        f"lenient=True to skip such records", path=str(path), line=n) from None
            report.note(f"{path}, {where} {n}: {exc}")
            continue
        if isinstance(got, tuple):
            yield got
        else:
            yield got, None


def _load_file(path: str | Path, fmt: str | None, *, lenient: bool, split: str | None) -> QAList:
    p = Path(path)
    if not p.exists():
        raise QAFileNotFoundError("no such QA file; check the path", path=str(p))
    if p.is_dir():
        # one file per split name: an exported world has both <split>.parquet and <split>.jsonl
        pref = {".parquet": 0, ".jsonl": 1, ".json": 2}
        by_stem: dict[str, Path] = {}
        for x in sorted(p.iterdir()):
            if _base_suffix(x) in pref and not x.name.startswith(".") and x.name.split(".")[0] != "corpus":
                stem = x.name.split(".")[0]
                if stem not in by_stem or pref[_base_suffix(x)] < pref[_base_suffix(by_stem[stem])]:
                    by_stem[stem] = x
        files = [by_stem[k] for k in sorted(by_stem)]
        if split is not None:
            files = [x for x in files if x.name.split(".")[0] == split]
            if not files:
                raise QAFileNotFoundError(f"no file for split {split!r} in this directory", path=str(p))
            split = None
        if not files:
            raise QAFileNotFoundError("directory holds no .parquet/.json/.jsonl QA files", path=str(p))
        out = QAList(report=LoadReport(source=str(p), format=fmt or "auto"))
        for f in files:
            part = _load_file(f, fmt, lenient=lenient, split=None)
            out.extend(part)
            out.report.loaded += part.report.loaded
            out.report.skipped += part.report.skipped
            out.report.errors.extend(part.report.errors[: _MAX_ERRORS_KEPT - len(out.report.errors)])
        return out
    fmt = fmt or detect_format(p)
    if fmt not in CONVERTERS:
        raise ConfigError(f"unknown QA format {fmt!r}; use one of {', '.join(CONVERTERS)}")
    report = LoadReport(source=str(p), format=fmt)
    out = QAList((ex for ex, _ in _iter_examples(p, fmt, report, lenient)), report=report)
    if split is not None:
        if not any("split" in q.metadata for q in out):
            raise ConfigError(f"{p} records carry no 'split' field, so split={split!r} cannot select any; "
                              f"the file is one split: load it without split=")
        out = QAList([q for q in out if q.metadata.get("split") == split], report=report)
    report.loaded = len(out)
    return out


def load_search_r1_parquet(path: str | Path, *, split: str | None = None, lenient: bool = False) -> QAList:
    """Search-R1 / verl parquet: ``prompt``, ``reward_model.ground_truth.target`` (list, or a string joined
    with ``<|answer_split|>``), ``extra_info``; the original ``question`` / ``golden_answers`` / ``id`` columns
    win when present."""
    return _load_file(path, "search_r1", lenient=lenient, split=split)


def load_flashrag_jsonl(path: str | Path, *, split: str | None = None, lenient: bool = False) -> QAList:
    """FlashRAG jsonl: ``{"id", "question", "golden_answers", "metadata"?}`` per line."""
    return _load_file(path, "flashrag", lenient=lenient, split=split)


def load_hotpotqa(path: str | Path, *, lenient: bool = False) -> QAList:
    """HotpotQA (distractor or fullwiki; a JSON array or jsonl). ``supporting_ids`` stay empty (the file has
    no corpus ids); ``metadata["supporting_titles"]`` names the gold paragraphs. Use :func:`pooled_corpus`
    for a corpus with ids."""
    return _load_file(path, "hotpotqa", lenient=lenient, split=None)


def load_musique(path: str | Path, *, lenient: bool = False) -> QAList:
    """MuSiQue jsonl (``paragraphs`` with ``is_supporting``; ``answer_aliases`` become extra answers)."""
    return _load_file(path, "musique", lenient=lenient, split=None)


def load_2wiki(path: str | Path, *, lenient: bool = False) -> QAList:
    """2WikiMultihopQA (JSON array or jsonl: ``context``, ``supporting_facts``, ``type``, ``evidences``)."""
    return _load_file(path, "2wiki", lenient=lenient, split=None)


# ------------------------------------------------------------------------------------------------
# Hugging Face and the world
# ------------------------------------------------------------------------------------------------
def _hf_row(rec: Mapping) -> Mapping:
    """HF's HotpotQA stores ``context``/``supporting_facts`` as columns of lists; make them pairs."""
    out = dict(rec)
    ctx = rec.get("context")
    if isinstance(ctx, Mapping) and "title" in ctx:
        key = "sentences" if "sentences" in ctx else "content"
        out["context"] = [[t, s] for t, s in zip(ctx["title"], ctx[key])]
    sf = rec.get("supporting_facts")
    if isinstance(sf, Mapping) and "title" in sf:
        out["supporting_facts"] = [[t, i] for t, i in zip(sf["title"], sf.get("sent_id", sf.get("sent_ids", [])))]
    if "_id" not in out and "id" in out and "context" in out:
        out["_id"] = out["id"]
    return out


def load_hf_dataset(name: str, split: str = "train", *, config: str | None = None, format: str | None = None,
                    lenient: bool = False) -> QAList:
    """A Hugging Face dataset by name, through ``datasets`` (online, or from its local cache).

    Raises :class:`~searchgym.errors.DatasetUnavailableError` with the fix when ``datasets`` is not
    installed, the machine is offline, or the name is unknown.
    """
    try:
        import datasets
    except ImportError:
        raise DatasetUnavailableError(f"loading {name!r} needs the 'datasets' package: pip install "
                                      f"'searchgym[hf]'") from None
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types (ConnectionError, ...)
        offline = any(os.environ.get(v, "").lower() in ("1", "true", "yes")
                      for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))
        hint = ("The machine is offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set) and the dataset is not in "
                "the local cache" if offline else "The name may be wrong or the hub unreachable")
        raise DatasetUnavailableError(
            f"cannot load Hugging Face dataset {name!r} (split {split!r}): {type(exc).__name__}: {exc}. "
            f"{hint}; download the files once and pass their path to load_qa instead") from None
    report = LoadReport(source=f"hf:{name}:{split}", format=format or "auto")
    out = QAList(report=report)
    fmt = format
    for n, rec in enumerate(ds, 1):
        rec = _hf_row(rec)
        fmt = fmt or format_of_record(rec)
        if fmt is None:
            raise CorpusFormatError(f"Hugging Face dataset {name!r} has no QA fields this loader knows (columns "
                                    f"{sorted(rec)[:12]}); pass format=", path=f"hf:{name}")
        try:
            try:
                got = CONVERTERS[fmt](rec, n, name.replace("/", "_"))
            except _RECORD_ERRORS as exc:
                raise _Bad(f"a field has the wrong type or shape ({type(exc).__name__})") from None
        except _Bad as exc:
            if not lenient:
                raise CorpusFormatError(f"malformed record {n}: {exc}", path=f"hf:{name}:{split}",
                                        line=n) from None
            report.note(f"hf:{name}, record {n}: {exc}")
            continue
        out.append(got[0] if isinstance(got, tuple) else got)
    report.format, report.loaded = fmt or "auto", len(out)
    return out


def _load_world(name: str, split: str | None) -> QAList:
    from searchgym.data.world import default_world

    seed = 0
    if ":" in name:
        try:
            seed = int(name.split(":", 1)[1])
        except ValueError:
            raise ConfigError(f"bad world name {name!r}; use 'world' or 'world:<seed>'") from None
    w = default_world(seed)
    qs = w.split(split) if split is not None else w.questions
    return QAList(qs, report=LoadReport(source=name, format="world", loaded=len(qs)))


def load_ircot(path: str | Path, *, lenient: bool = False) -> QAList:
    """IRCoT's processed HotpotQA/2Wiki/MuSiQue layout (``question_text``, ``answers_objects``, ``contexts``)."""
    return _load_file(path, "ircot", lenient=lenient, split=None)


_CLI_FLAGS = ((re.compile(r"\blenient=True\b"), "--lenient"), (re.compile(r"\bformat=\s?"), "--format "),
              (re.compile(r"\bsplit=(?=[\s;,.)]|$)"), "--split"),
              (re.compile(r"\b(dataset|corpus|retriever)=(?=[\s;,.)]|$)"), r"--\1"))


def cli_message(message: str) -> str:
    """An error message for the command line: Python keyword arguments (``format=``, ``lenient=True``,
    ``split=``, ``dataset=``, ``corpus=``) become the CLI flags that do the same (``--format``, ...)."""
    for pat, flag in _CLI_FLAGS:
        message = pat.sub(flag, message)
    return message


def load_qa(path_or_name: str | Path, *, format: str | None = None, split: str | None = None,
            lenient: bool = False) -> QAList:
    """Load QA examples from a file, a directory of split files, ``"world"`` / ``"world:<seed>"``, or a
    Hugging Face dataset name, detecting the format unless ``format`` is given.

    ``split`` selects records whose ``split`` field matches (Search-R1 ``extra_info.split``), the file
    ``<split>.*`` of a directory, a world split, or a Hugging Face split (default ``"train"``).
    """
    if format is not None and format not in FORMATS:
        raise ConfigError(f"unknown QA format {format!r}; use one of {', '.join(FORMATS)}")
    s = str(path_or_name)
    p = Path(s)
    if format == "world" or s == "world" or (s.startswith("world:") and not p.exists()):
        return _load_world(s if s.startswith("world") else "world", split)
    if p.exists():
        return _load_file(p, None if format in (None, "hf") else format, lenient=lenient, split=split)
    looks_like_file = _base_suffix(p) in (".parquet", ".json", ".jsonl") or s.startswith((".", "/", "~"))
    if format == "hf" or (not looks_like_file and re.fullmatch(r"[\w.-]+(/[\w.-]+)?", s)):
        return load_hf_dataset(s, split or "train", lenient=lenient)
    raise QAFileNotFoundError("no such QA file; check the path", path=s)


# ------------------------------------------------------------------------------------------------
# pooled corpus
# ------------------------------------------------------------------------------------------------
def pooled_corpus(paths: str | Path | Sequence[str | Path], *, lenient: bool = False,
                  id_prefix: str = "", format: str | None = None) -> tuple[list[Passage], list[QAExample]]:
    """One corpus from QA files that carry their own paragraphs (HotpotQA, MuSiQue, 2Wiki).

    Paragraphs are deduplicated by ``(title, text)`` (whitespace-normalised) across all files; passage
    ids are ``f"{id_prefix}{row}"`` in first-seen order. Each question's ``supporting_ids`` are the ids of
    its supporting paragraphs (HotpotQA/2Wiki: the context paragraphs named in ``supporting_facts``;
    MuSiQue, IRCoT: ``is_supporting``). Question ids must be unique across the files. ``format`` forces
    the format of every file (default: detected per file).
    """
    if format is not None and format not in PARAGRAPH_FORMATS:
        raise ConfigError(f"format={format!r} carries no paragraphs; pooled_corpus takes "
                          f"{', '.join(PARAGRAPH_FORMATS)}")
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows: dict[tuple[str, str], int] = {}
    passages: list[Passage] = []
    questions: list[QAExample] = []
    seen_q: set[str] = set()
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise QAFileNotFoundError("no such QA file; check the path", path=str(p))
        fmt = format or detect_format(p)
        if fmt not in PARAGRAPH_FORMATS:
            raise ConfigError(f"{p} is {fmt} data, which carries no paragraphs; pooled_corpus takes "
                              f"{', '.join(PARAGRAPH_FORMATS)} files")
        report = LoadReport(source=str(p), format=fmt)
        for ex, paras in _iter_examples(p, fmt, report, lenient):
            if ex.id in seen_q:
                if not lenient:
                    raise DuplicateIdError(f"question id {ex.id!r} appears twice across the pooled files",
                                           path=str(p))
                continue
            seen_q.add(ex.id)
            sup: list[tuple[str, str]] = []
            for title, text, is_sup in paras or []:
                key = (title, text)
                row = rows.get(key)
                if row is None:
                    row = rows[key] = len(passages)
                    passages.append(Passage(f"{id_prefix}{row}", title, text))
                if is_sup and all(pid != passages[row].id for _, pid in sup):
                    sup.append((title, passages[row].id))
            # hop order (supporting_facts / question_decomposition order), not context order
            order = {t: i for i, t in enumerate(ex.metadata.get("supporting_titles") or [])}
            sup.sort(key=lambda tp: order.get(tp[0], len(order)))
            ex.supporting_ids = [pid for _, pid in sup]
            questions.append(ex)
    return passages, questions
