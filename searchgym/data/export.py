"""Export a world (or any QA list) in the formats other trainers read.

``export_world(world, out_dir)`` writes:

- ``corpus.jsonl``: the Search-R1 corpus, ``{"id", "contents": "\\"Title\\"\\ntext"}`` per line;
- ``<split>.parquet``: Search-R1 / verl QA rows (``data_source``, ``prompt``, ``ability``,
  ``reward_model.ground_truth.target``, ``extra_info`` with ``split``, ``index``, ``family``, ``hops``,
  ``supporting_ids``), plus the original ``id`` / ``question`` / ``golden_answers`` columns;
- ``<split>.jsonl``: FlashRAG QA lines ``{"id", "question", "golden_answers", "metadata"}``;
- ``world.json``: the generation arguments, counts and a fingerprint.

Every file is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from searchgym.data.qa import QAExample

# Search-R1's base prompt (scripts/data_process/nq_search.py, make_prefix with template_type="base").
SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)


def fix_question(question: str) -> str:
    """Search-R1 adds a trailing question mark when the question has none (``"Name X."`` -> ``"Name X.?"``).

    Kept exactly so that exported prompts and the environment's prompts are the prompts Search-R1 trains on.
    """
    q = question.strip()
    return q if q.endswith("?") else q + "?"


def search_r1_prompt(question: str) -> str:
    """The Search-R1 user prompt for ``question``; the environment renders the same text."""
    return SEARCH_R1_PROMPT.format(question=fix_question(question))


def _atomic_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def _write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    tmp = _atomic_path(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _parquet_schema():
    import pyarrow as pa

    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()),
                                    ("ground_truth", pa.struct([("target", pa.list_(pa.string()))]))])),
        ("extra_info", pa.struct([
            ("split", pa.string()), ("index", pa.int64()), ("family", pa.string()), ("hops", pa.int64()),
            ("supporting_ids", pa.list_(pa.string())), ("phrasing", pa.string()),
            ("answer_type", pa.string()), ("entity_types", pa.list_(pa.string())),
            ("bridge", pa.list_(pa.string())), ("relations", pa.list_(pa.string())),
            ("subject", pa.list_(pa.string()))])),
        ("id", pa.string()),
        ("question", pa.string()),
        ("golden_answers", pa.list_(pa.string())),
    ])


def _str_list(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else []


def qa_rows(examples: Sequence[QAExample], split: str, data_source: str) -> list[dict[str, Any]]:
    """Search-R1 / verl parquet rows for ``examples``."""
    rows = []
    for i, q in enumerate(examples):
        m = q.metadata
        hops = m.get("hops")
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": "user", "content": search_r1_prompt(q.question)}],
            "ability": "fact-reasoning",
            "reward_model": {"style": "rule", "ground_truth": {"target": list(q.answers)}},
            "extra_info": {"split": split, "index": i, "family": m.get("family"),
                           "hops": int(hops) if hops is not None else None,
                           "supporting_ids": list(q.supporting_ids), "phrasing": m.get("phrasing"),
                           "answer_type": m.get("answer_type"),
                           "entity_types": _str_list(m.get("entity_types")),
                           "bridge": _str_list(m.get("bridge")), "relations": _str_list(m.get("relations")),
                           "subject": _str_list(m.get("subject"))},
            "id": q.id,
            "question": q.question,
            "golden_answers": list(q.answers),
        })
    return rows


def write_qa_parquet(examples: Sequence[QAExample], path: str | Path, *, split: str,
                     data_source: str = "searchgym_world") -> Path:
    """One split as Search-R1 / verl parquet (atomic)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(qa_rows(examples, split, data_source), schema=_parquet_schema())
    return _write_atomic(Path(path), lambda tmp: pq.write_table(table, tmp))


def write_flashrag_jsonl(examples: Sequence[QAExample], path: str | Path) -> Path:
    """FlashRAG jsonl ``{"id", "question", "golden_answers", "metadata"}`` (atomic); the metadata keeps
    ``supporting_ids`` so a round trip loses nothing."""
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for q in examples:
                meta = dict(q.metadata)
                meta["supporting_ids"] = list(q.supporting_ids)
                f.write(json.dumps({"id": q.id, "question": q.question, "golden_answers": list(q.answers),
                                    "metadata": meta}, ensure_ascii=False) + "\n")

    return _write_atomic(Path(path), write)


def export_world(world, out_dir: str | Path, *, on_step: Callable[[str], None] | None = None,
                 data_source: str = "searchgym_world") -> dict[str, Path]:
    """Write ``world`` to ``out_dir`` (corpus.jsonl, one parquet + one FlashRAG jsonl per split, world.json).

    ``on_step(name)`` is called after each file (for progress bars). ``data_source`` fills the parquet
    column of that name (verl picks its scorer by it). Returns ``{name: path}``.
    """
    from searchgym.retrieval.corpus import write_jsonl

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    step = on_step or (lambda _name: None)
    written: dict[str, Path] = {"corpus": write_jsonl(world.passages, out / "corpus.jsonl")}
    step("corpus.jsonl")
    for split, examples in world.splits.items():
        written[f"{split}.parquet"] = write_qa_parquet(examples, out / f"{split}.parquet", split=split,
                                                       data_source=data_source)
        step(f"{split}.parquet")
        written[f"{split}.jsonl"] = write_flashrag_jsonl(examples, out / f"{split}.jsonl")
        step(f"{split}.jsonl")
    from searchgym.data.world.world import GENERATOR_VERSION

    manifest = {"generator": "searchgym.data.World", "generator_version": GENERATOR_VERSION, "seed": world.seed, "n_entities": world.n_entities,
                "confusable_share": world.confusable_share, "fingerprint": world.fingerprint(),
                "passages": len(world.passages), "questions": {s: len(v) for s, v in world.splits.items()},
                "files": sorted(p.name for p in written.values())}

    def write_manifest(tmp: Path) -> None:
        tmp.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

    written["world.json"] = _write_atomic(out / "world.json", write_manifest)
    step("world.json")
    return written
