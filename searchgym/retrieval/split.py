"""``searchgym index split``: one index directory per shard of a sharded index (data layout, not serving).

``split_sharded_index(DIR, OUT)`` writes ``OUT/shard-000`` ...: the shard's arrays (hard links where the
filesystem allows), the global vocabulary and the shard's own passages. Each scores with the global statistics,
so a set of split shards served side by side merges to the unsharded index's exact top k.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from searchgym.errors import ConfigError, IndexCorruptError
from searchgym.retrieval.index import atomic_dir, read_manifest, write_manifest


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def split_sharded_index(src: str | Path, out: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write one index directory per shard of the sharded index ``src`` into ``out/shard-NNN``."""
    from searchgym.retrieval.sharded import NAME as SHARDED
    from searchgym.retrieval.store import OFFSETS, RECORDS

    src = Path(src)
    m = read_manifest(src)
    entry = m["backends"].get(SHARDED)
    if entry is None:
        raise ConfigError(f"{src} is not a sharded index (backends: {sorted(m['backends'])}); build it with "
                          "`searchgym index build CORPUS --shards N`")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    offsets = np.memmap(src / m["passages_store"]["dir"] / OFFSETS, dtype="<u8", mode="r")
    records = src / m["passages_store"]["dir"] / RECORDS
    dirs = []
    for i, spec in enumerate(entry["shards"]):
        a, n = int(spec["start"]), int(spec["n"])
        d = out / f"shard-{i:03d}"
        with atomic_dir(d, overwrite=overwrite) as tmp:
            (tmp / "passages").mkdir()
            lo, hi = int(offsets[a]), int(offsets[a + n])
            with open(records, "rb") as src_f, open(tmp / "passages" / RECORDS, "wb") as g:
                src_f.seek(lo)
                left = hi - lo
                while left:
                    chunk = src_f.read(min(left, 1 << 24))
                    if not chunk:
                        raise IndexCorruptError(f"{records} ends before byte {hi}")
                    g.write(chunk)
                    left -= len(chunk)
            (np.asarray(offsets[a:a + n + 1], dtype="<u8") - np.uint64(lo)).astype("<u8").tofile(
                tmp / "passages" / OFFSETS)
            sdir = tmp / SHARDED / "shards" / "000"
            sdir.mkdir(parents=True)
            for f in ("data.npy", "indices.npy", "indptr.npy"):
                _link_or_copy(src / spec["dir"] / f, sdir / f)
            _link_or_copy(src / entry["vocab_file"], tmp / SHARDED / "vocab.json")
            sub = {**entry, "vocab_file": f"{SHARDED}/vocab.json",
                   "shards": [{**spec, "dir": f"{SHARDED}/shards/000", "start": 0}],
                   "split_from": {"corpus_fingerprint": m["corpus_fingerprint"], "shard": i,
                                  "of": len(entry["shards"]), "start": a, "n_passages": m["n_passages"]}}
            write_manifest(tmp, n_passages=n, fingerprint=f"{m['corpus_fingerprint']}#shard{i}",
                           backends={SHARDED: sub}, build_seconds=0.0,
                           passages={"passages_store": {"format": "records-offsets", "dir": "passages"}})
        dirs.append(d)
    (out / "shards.json").write_text(json.dumps({"source": str(src.resolve()), "shards": [p.name for p in dirs],
                                                 "n_passages": m["n_passages"],
                                                 "corpus_fingerprint": m["corpus_fingerprint"]}, indent=2))
    return dirs
