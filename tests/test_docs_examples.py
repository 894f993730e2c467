"""Every ``python`` and ``bash`` block of README.md and docs/*.md runs, as a reader would run it.

Convention (docs/index.md, "About these docs"): the blocks of one page run in order, in one fresh temporary
directory as the working directory, with this venv's ``bin/`` first on PATH (so ``python`` and ``searchgym``
are the project's), offline (``HF_HUB_OFFLINE=1``). A block directly preceded by
``<!-- docs-test: skip REASON -->`` is not run (only for a GPU or an outside service); one preceded by
``<!-- docs-test: slow -->`` runs in its own case, after the page's other blocks that come before it. Every
page runs under ``-m slow`` (``.ci/run`` runs them; ``make test`` keeps the extractor's checks). Blocks in
other languages (text, json, console, yaml) are not run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGS = {"python": "py", "bash": "sh"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>\w+)\s*(?P<reason>.*?)\s*-->\s*$")
BLOCK_TIMEOUT_S = 600


@dataclass
class Block:
    page: str
    line: int          # 1-based line of the opening fence
    lang: str
    code: str
    mark: str | None   # None, "skip" or "slow"
    reason: str


def extract_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with the docs-test marker of the line just above each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m["indent"], m["ticks"], m["lang"].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{re.escape(ticks[0])}{{{len(ticks)},}}\s*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        prev = lines[i - 1] if i > 0 else ""
        mk = MARKER.match(prev)
        blocks.append(Block(path.name, i + 1, lang, "\n".join(body) + "\n", mk["kind"] if mk else None,
                            mk["reason"] if mk else ""))
        i = j + 1
    return blocks


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", MPLBACKEND="Agg",
               TRL_EXPERIMENTAL_SILENCE="1", PYTHONUNBUFFERED="1", NO_COLOR="1", TERMINAL_WIDTH="120",
               SEARCHGYM_CACHE=env.get("SEARCHGYM_CACHE", str(tmp / ".cache")))
    env.pop("PYTHONPATH", None)
    return env


# One Python process per page runs its blocks in order: a Python block as ``python block.py`` would run it
# (``runpy`` as ``__main__``, in a fresh namespace, from the page's directory, with the environment reset), a bash
# block in ``bash -euo pipefail``. It saves an interpreter start and the imports per block (about 40 blocks).
DRIVER = r"""
import contextlib, io, json, os, runpy, subprocess, sys, traceback
plan, env0, limit = json.load(open(sys.argv[1])), dict(os.environ), float(sys.argv[2])
for lang, script, line in plan:
    os.chdir(os.path.dirname(script)); os.environ.clear(); os.environ.update(env0)
    if lang == "sh":
        r = subprocess.run(["bash", "-euo", "pipefail", script], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=limit)
        rc, out, err = r.returncode, r.stdout, r.stderr
    else:
        out_buf, err_buf, rc = io.StringIO(), io.StringIO(), 0
        sys.argv = [script]
        with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                traceback.print_exc()
                rc = 1
        out, err = out_buf.getvalue(), err_buf.getvalue()
    if rc:
        print(json.dumps({"line": line, "rc": rc, "stdout": out[-3000:], "stderr": err[-6000:]}), flush=True)
        sys.exit(3)
print(json.dumps({"ran": len(plan)}), flush=True)
"""


def run_page(path: Path, tmp: Path, *, slow: bool | int) -> int:
    """Run the page's blocks in order in ``tmp``; return how many ran. A failing block fails with its output.

    ``slow``: False runs no slow block, True every one, a line number only the slow block opening there (with
    every fast block before it, which may make its inputs).
    """
    plan, blocks = [], {}
    for n, b in enumerate(extract_blocks(path)):
        if b.lang not in RUN_LANGS or b.mark == "skip":
            continue
        if b.mark == "slow" and not (slow is True or (slow is not False and b.line == slow)):
            continue
        if slow not in (True, False) and b.line > slow:
            break
        script = tmp / f".block{n:02d}_line{b.line}.{RUN_LANGS[b.lang]}"
        script.write_text(b.code, encoding="utf-8")
        plan.append((RUN_LANGS[b.lang], str(script), b.line))
        blocks[b.line] = b
    if not plan:
        return 0
    (tmp / ".plan.json").write_text(json.dumps(plan), encoding="utf-8")
    (tmp / ".driver.py").write_text(DRIVER, encoding="utf-8")
    try:
        r = subprocess.run([sys.executable, ".driver.py", ".plan.json", str(BLOCK_TIMEOUT_S)], cwd=tmp,
                           env=_env(tmp), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S * len(plan),
                           stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{path.name}: its blocks ran over {BLOCK_TIMEOUT_S} s each")
    last = (r.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        res = json.loads(last)
    except json.JSONDecodeError:
        res = {}
    if "line" in res:
        b = blocks[res["line"]]
        pytest.fail(f"{b.page}:{b.line}: the {b.lang} block exited {res['rc']}\n--- block ---\n{b.code}"
                    f"--- stdout (end) ---\n{res['stdout']}\n--- stderr (end) ---\n{res['stderr']}")
    if r.returncode != 0 or res.get("ran") != len(plan):
        pytest.fail(f"{path.name}: the block runner exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    return len(plan)


def _slow_blocks() -> list[Any]:
    """One case per slow block, named page-line-first words (e.g. ``README.md-63-searchgym-squeeze``)."""
    cases = []
    for page in PAGES:
        for b in extract_blocks(page):
            if b.mark == "slow" and b.lang in RUN_LANGS:
                words = re.findall(r"[A-Za-z][\w-]*", b.code.split("\n", 1)[0])[:3]
                cases.append(pytest.param(page, b.line, id="-".join([page.name, str(b.line), *words])))
    return cases


# Each page end to end (3-50 s a page on 2 idle cores, about 3 minutes in all): slow, and .ci/run runs them.
# The fast suite keeps the extractor and marker checks; `pytest -m slow tests/test_docs_examples.py` runs a page.
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_examples_run(page, tmp_path):
    run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page,line", _slow_blocks())
def test_slow_block_runs(page, line, tmp_path):
    """A slow block, after the fast blocks of its page that come before it."""
    assert run_page(page, tmp_path, slow=line) > 0


def test_markers_are_well_formed_and_every_skip_says_why():
    for page in PAGES:
        for line in page.read_text(encoding="utf-8").splitlines():
            if not re.match(r"^\s*<!--\s*docs-test", line):
                continue
            m = MARKER.match(line)
            assert m and m["kind"] in ("skip", "slow"), f"{page.name}: unknown docs-test marker {line!r}"
            if m["kind"] == "skip":
                assert len(m["reason"]) >= 10, f"{page.name}: a skip marker must give its reason: {line!r}"
        for b in extract_blocks(page):
            if b.mark is None:
                continue
            assert b.lang in RUN_LANGS, f"{page.name}:{b.line}: a docs-test marker above a {b.lang!r} block"


def test_the_extractor_reads_fences_markers_and_indentation(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n```python\nprint(1)\n```\n<!-- docs-test: skip needs a GPU here -->\n```bash\nnvidia-smi\n"
                    "```\n- item\n\n  ```python\n  x = 2\n  ```\n<!-- docs-test: slow -->\n```python\nimport time\n```\n"
                    "```json\n{}\n```\n")
    blocks = extract_blocks(page)
    assert [(b.lang, b.mark) for b in blocks] == [("python", None), ("bash", "skip"), ("python", None),
                                                  ("python", "slow"), ("json", None)]
    assert blocks[1].reason == "needs a GPU here" and blocks[2].code == "x = 2\n"
    bad = tmp_path / "bad.md"
    bad.write_text("```python\nraise SystemExit(3)\n```\n")
    with pytest.raises(pytest.fail.Exception, match="exited 3"):
        run_page(bad, tmp_path, slow=False)


def test_the_readme_trl_example_is_the_cpu_offline_default():
    """The README's TRL block is runnable as extracted: a locally built model, use_cpu when there is no GPU."""
    blocks = [b for b in extract_blocks(ROOT / "README.md") if b.lang == "python" and "GRPOTrainer" in b.code]
    assert len(blocks) == 1, "the README has one TRL example"
    code = blocks[0].code
    assert "use_cpu=not gpu" in code and 'model="tiny-qwen"' in code and blocks[0].mark in (None, "slow")
    before = [b for b in extract_blocks(ROOT / "README.md") if b.line < blocks[0].line and b.lang == "bash"]
    assert any("searchgym tiny-model --out tiny-qwen" in b.code for b in before)
