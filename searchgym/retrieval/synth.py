"""A synthetic corpus with the statistics of Search-R1's wiki-18, streamed to disk (no download).

wiki-18 (the 2018 Wikipedia dump in 100-word passages, ``psgs_w100``): 21,015,324 passages, each a titled
chunk of ~100 words, ~3.2M article titles (so ~6-7 consecutive passages share a title), a vocabulary of a few
million terms with a Zipfian frequency law. This generator draws words from a Zipf law (exponent 1.07) over
``vocab_size`` synthetic words (pronounceable syllable strings, distinct per rank), puts the 25 commonest
English function words at the top ranks (as in real text, where the stopword list removes them), titles every
run of ``passages_per_title`` passages with 1-3 rarer words, and writes Search-R1 jsonl
(``{"id", "contents": "\\"Title\\"\\ntext"}``) in batches: memory is the vocabulary, never the corpus.

    python -m searchgym.retrieval.synth corpus.jsonl 100000          # 100k passages
    python -m searchgym.retrieval.synth corpus.jsonl 1000 --vocab-size 5000 --seed 3

Arguments are bounded (:data:`LIMITS`) and the output path is checked before any work: a folder, a missing
parent or an out-of-range argument is a one-line ConfigError, and no temporary file is left behind.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import numpy as np

from searchgym.errors import ConfigError, SearchGymError

# The largest values accepted: memory is ~70 bytes per vocabulary word (words + CDF) and ~40 bytes per drawn
# word of a batch of 2,048 passages, so the caps keep a run under ~1 GB whatever it is given.
LIMITS = {"n": 10**10, "vocab_size": 10_000_000, "words_per_passage": 10_000, "passages_per_title": 10**6,
          "seed": 2**63 - 1}
WIKI18_PASSAGES = 21_015_324
ZIPF_EXPONENT = 1.07
_FUNCTION_WORDS = ("the", "of", "and", "in", "a", "to", "was", "is", "for", "on", "as", "by", "with", "he",
                   "at", "from", "his", "that", "it", "an", "which", "were", "also", "are", "be")
_CONSONANTS = "bcdfghjklmnprstvz"
_SYLLABLES = [c + v for c in _CONSONANTS for v in "aeiou"] + [v + c for v in "aeiou" for c in "lnrst"]


def _word(rank: int) -> str:
    """A distinct pronounceable word per rank: the rank's digits in base len(_SYLLABLES), as syllables."""
    base = len(_SYLLABLES)
    out = []
    r = rank
    while True:
        r, d = divmod(r, base)
        out.append(_SYLLABLES[d])
        if r == 0:
            return "".join(reversed(out))


def vocabulary(vocab_size: int) -> list[str]:
    words = list(_FUNCTION_WORDS[: min(len(_FUNCTION_WORDS), vocab_size)])
    words += [_word(r) for r in range(vocab_size - len(words))]
    return words


class _Zipf:
    def __init__(self, vocab_size: int, exponent: float, rng: np.random.Generator):
        w = 1.0 / np.arange(1, vocab_size + 1, dtype=np.float64) ** exponent
        self.cdf = np.cumsum(w / w.sum())
        self.rng = rng

    def draw(self, n: int) -> np.ndarray:
        idx = np.searchsorted(self.cdf, self.rng.random(n), side="right")
        return np.minimum(idx, len(self.cdf) - 1)


def iter_synthetic_passages(n: int, *, vocab_size: int = 2_000_000, words_per_passage: int = 100,
                            passages_per_title: int = 7, seed: int = 0) -> Iterator[tuple[str, str, str]]:
    """Yield ``(id, title, text)`` for ``n`` passages (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    words = vocabulary(vocab_size)
    zipf = _Zipf(vocab_size, ZIPF_EXPONENT, rng)
    rare_lo = min(1000, vocab_size - 1)
    batch = 2048
    title = ""
    for start in range(0, n, batch):
        m = min(batch, n - start)
        lens = rng.integers(max(1, words_per_passage - 15), words_per_passage + 16, size=m)
        flat = zipf.draw(int(lens.sum())).tolist()
        pos = 0
        for j in range(m):
            i = start + j
            if i % passages_per_title == 0:
                title = " ".join(words[int(r)] for r in rng.integers(rare_lo, vocab_size,
                                                                       size=int(rng.integers(1, 4)))).title()
            ln = int(lens[j])
            text = " ".join([words[r] for r in flat[pos:pos + ln]])
            pos += ln
            yield str(i), title, text


def check_arguments(**values: int) -> None:
    """ConfigError unless each value is an int within ``0 <= value <= LIMITS[name]`` (n and seed may be 0)."""
    for name, v in values.items():
        lo = 0 if name in ("n", "seed") else 1
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= LIMITS[name]:
            raise ConfigError(f"synthetic corpus: {name} = {v!r} must be an integer in {lo}..{LIMITS[name]:,}")


def check_output(path: Path) -> None:
    """ConfigError unless ``path`` can become a file: not a folder, its parent an existing folder."""
    if path.is_dir():
        raise ConfigError(f"{path} is a folder; give the jsonl file to write (e.g. {path / 'corpus.jsonl'})")
    if not path.parent.is_dir():
        raise ConfigError(f"{path.parent} is not an existing folder; create it first or choose another output")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} exists and is not a regular file; choose another output")


def _remove_stale_tmp(path: Path) -> None:
    """Temporary files of earlier runs of ``path`` whose process is gone (a killed run)."""
    for p in path.parent.glob(f".{path.name}.tmp-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            p.unlink(missing_ok=True)


def write_synthetic_corpus(path: str | Path, n: int, *, vocab_size: int = 2_000_000, words_per_passage: int = 100,
                           passages_per_title: int = 7, seed: int = 0) -> Path:
    """Write ``n`` synthetic passages as Search-R1 jsonl to ``path`` (atomically), streaming."""
    check_arguments(n=n, vocab_size=vocab_size, words_per_passage=words_per_passage,
                    passages_per_title=passages_per_title, seed=seed)
    path = Path(path)
    check_output(path)
    _remove_stale_tmp(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        rows = iter_synthetic_passages(n, vocab_size=vocab_size, seed=seed, words_per_passage=words_per_passage,
                                       passages_per_title=passages_per_title)
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": pid, "contents": f'"{title}"\n{text}'}) + "\n" for pid, title, text in rows)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def synthetic_queries(n: int, *, vocab_size: int = 2_000_000, seed: int = 1) -> list[str]:
    """``n`` queries of 5-12 words drawn from the same Zipf law (common words kept, as in the reference bench)."""
    rng = np.random.default_rng(seed)
    words = vocabulary(vocab_size)
    zipf = _Zipf(vocab_size, ZIPF_EXPONENT, rng)
    return [" ".join(words[int(r)] for r in zipf.draw(int(rng.integers(5, 13)))) for _ in range(n)]


def _count(text: str) -> int:
    """An integer argument, also written as ``1e6`` (an integral number); out-of-range values are refused later."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not f.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    return int(f)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> None:
    ap = _Parser(prog="python -m searchgym.retrieval.synth", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the jsonl file to write")
    ap.add_argument("n", type=_count, help="number of passages (wiki-18 has 21,015,324)")
    ap.add_argument("--vocab-size", type=_count, default=2_000_000)
    ap.add_argument("--words", type=_count, default=100, help="mean words per passage")
    ap.add_argument("--seed", type=_count, default=0)
    a = ap.parse_args(argv)
    try:
        write_synthetic_corpus(a.out, a.n, vocab_size=a.vocab_size, words_per_passage=a.words, seed=a.seed)
    except SearchGymError as exc:
        ap.exit(2, f"error: {exc}\n")
    except OSError as exc:
        ap.exit(2, f"error: cannot write {a.out}: {exc.strerror or exc}\n")
    print(f"wrote {a.n:,} passages to {a.out} ({a.out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
