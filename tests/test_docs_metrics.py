"""docs/metrics.md explains every key an integration logs and every column a trainer prints (issue 35).

The keys come from a real tracker update on real rollouts (every level, token entropies, an alarm baseline), TRL's
``tools/*`` keys from TRL's own source, and the printed columns from the training commands' source: a new key or
column that the page does not explain fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from searchgym.diversity.keys import DEFAULT_KEYS, select
from searchgym.diversity.moves import MOVES
from searchgym.diversity.strategy import STRATEGIES
from searchgym.diversity.templates import LEVELS
from searchgym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
DOCUMENTED = set(re.findall(r"`([^`\s]+)`", PAGE))
LEVEL_RE = re.compile(rf"^diversity/(well_formed/)?({'|'.join(map(re.escape, (*LEVELS, 'strategy')))})/")


def _pattern(key: str) -> str:
    key = LEVEL_RE.sub("diversity/<level>/", key)  # the page's <level> includes well_formed/<level>
    key = re.sub(r"^(diversity/<level>/share)/.+$", r"\1/<class>", key)
    return re.sub(r"^diversity/moves/(?!entropy$).+$", "diversity/moves/<move>", key)


@pytest.fixture(scope="module")
def logged() -> set[str]:
    from searchgym.agents.registry import make_agent
    from searchgym.agents.rollout import rollout
    from searchgym.diversity import DiversityTracker
    from searchgym.integrations._common import world_titles

    trajs = rollout(make_agent("diverse", seed=0), "searchgym/SearchQA-v0", 12, samples=3, split="train", seed=0,
                    num_envs=12, progress=False)
    tracker = DiversityTracker(levels=("string", "slot", "content", "pos"), titles=world_titles(None), n_boot=20)
    keys: set[str] = set()
    for step in range(2):
        keys |= set(tracker.update(step, trajs, token_entropies=[0.5, 0.1, 0.005, 1.2] * 10))
    return keys


def test_every_logged_key_is_on_the_metrics_page(logged):
    assert len(logged) > 100 and "diversity/slot/entropy" in logged
    missing = sorted({_pattern(k) for k in logged} - DOCUMENTED)
    assert not missing, f"docs/metrics.md does not explain: {missing}"
    for k in logged:  # a per-level key's field is documented under <level>, a class / move by its own name
        if k.startswith("diversity/strategy/share/"):
            assert k.rsplit("/", 1)[1] in DOCUMENTED, k
        if k.startswith("diversity/moves/"):
            assert k.rsplit("/", 1)[1] in DOCUMENTED | {"entropy"}, k
    assert set(STRATEGIES) <= DOCUMENTED and set(MOVES) <= DOCUMENTED


def test_the_default_set_is_logged_and_leads_the_page(logged):
    assert 10 <= len(DEFAULT_KEYS) <= 15 and set(DEFAULT_KEYS) <= logged
    watch = PAGE.split("## The few to watch", 1)[1].split("\n## ", 1)[0]
    assert [k for k in re.findall(r"^\| `([^`]+)`", watch, flags=re.MULTILINE)] == list(DEFAULT_KEYS)
    figures = {k: 1.0 for k in logged}
    assert list(select(figures)) == list(DEFAULT_KEYS)
    assert select(figures, "all") == figures
    assert set(select(figures, ["diversity/moves/", "step"])) == {k for k in logged if k.startswith(
        "diversity/moves/")} | {"step"}
    with pytest.raises(ConfigError, match="diversity_metrics"):
        select(figures, "some")


def test_trl_tools_keys_are_on_the_page():
    trl = pytest.importorskip("trl")
    src = (Path(trl.__file__).parent / "trainer" / "grpo_trainer.py").read_text(encoding="utf-8")
    keys = set(re.findall(r"[\"'](tools/[a-z_]+)[\"']", src))
    assert keys and keys <= DOCUMENTED, keys - DOCUMENTED


def test_every_printed_training_column_is_on_the_page():
    sources = [ROOT / "searchgym" / "train" / "commands.py", ROOT / "searchgym" / "experiments" / "squeeze" /
               "stages.py"]
    text = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    columns = set(re.findall(r"\b([a-z]+-H)\b", text))
    assert {"tok-H", "slot-H"} <= columns
    for col in (*columns, "loss", "LM loss", "reward", "step"):
        assert col in DOCUMENTED or f"`{col}`" in PAGE, col
    printed = set(re.findall(r"row\['((?:charts|losses)/[a-z_]+)'\]|r\['((?:charts|losses)/[a-z_]+)'\]", text))
    for key in {k for pair in printed for k in pair if k}:
        assert key in PAGE, key
