"""Pretraining the tiny LM on its world: the LM loss falls, only train questions are used, resume is exact."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.errors import ConfigError
from searchgym.train.tiny_lm import TinyLMConfig

SMALL = TinyLMConfig(vocab_size=500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                     max_positions=256)


@pytest.fixture(scope="module")
def world_lm(tmp_path_factory):
    from searchgym.data import World
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    world = World.generate(seed=5, n_entities=40)
    d = tmp_path_factory.mktemp("pre") / "init"
    create_tiny_lm(world_texts(world, prompts=["Question: {question}\n"]), d, SMALL, seed=0)
    yield world, d
    torch.set_num_threads(n)


def test_pretrain_texts_hold_passages_and_only_train_questions(world_lm):
    from searchgym.train.pretrain import pretrain_texts

    world, _ = world_lm
    texts = "\n".join(pretrain_texts(world))
    assert all(ex.question in texts for ex in world.split("train"))
    assert not any(ex.question in texts for ex in world.split("test"))
    assert world.passages[0].text in texts and "<answer>" in texts


def test_pretrain_reading_qa_puts_the_supporting_passages_before_each_question(world_lm):
    from searchgym.errors import ConfigError
    from searchgym.train.pretrain import PretrainArgs, pretrain_texts

    world, _ = world_lm
    by_id = {p.id: p for p in world.passages}
    n_pass = len(world.passages)
    reading = pretrain_texts(world)[n_pass:]
    closed = pretrain_texts(world, qa="closed")[n_pass:]
    for ex, r, c in zip(world.split("train"), reading, closed):
        assert r.endswith(c) and c.startswith("Question: " + ex.question)
        assert r.startswith("Doc 1(Title: ") and all(by_id[i].text in r for i in ex.supporting_ids)
    assert pretrain_texts(world, qa="none") == pretrain_texts(world)[:n_pass]
    with pytest.raises(ConfigError, match="qa"):
        PretrainArgs(qa="open").validate()


def test_pretrain_loss_falls_and_resume_is_exact(world_lm, tmp_path):
    from searchgym.train.pretrain import PretrainArgs, pretrain_texts, train_pretrain
    from searchgym.train.tiny_lm import load_lm

    world, init = world_lm
    texts = pretrain_texts(world)
    args = PretrainArgs(max_steps=6, batch_size=4, block_len=64, warmup_steps=1, checkpoint_every=3)
    m1, tok = load_lm(init)
    full = train_pretrain(m1, tok, texts, args, out_dir=tmp_path / "full")
    assert full[-1]["losses/lm"] < full[0]["losses/lm"]
    m2, tok2 = load_lm(init)
    train_pretrain(m2, tok2, texts, args, out_dir=tmp_path / "part", stop_after=4)  # killed after step 4
    m3, tok3 = load_lm(init)
    resumed = train_pretrain(m3, tok3, texts, args, out_dir=tmp_path / "part", resume=True)
    strip = [{k: v for k, v in r.items() if k != "charts/time"} for r in resumed]
    assert strip == [{k: v for k, v in r.items() if k != "charts/time"} for r in full]
    for k, v in m3.state_dict().items():
        assert torch.equal(v, m1.state_dict()[k]), k
    lines = (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3, 4, 5, 6]
    assert (tmp_path / "part" / "pretrain_done.json").exists()


def test_pretrain_bad_args_fail_fast():
    from searchgym.train.pretrain import PretrainArgs

    with pytest.raises(ConfigError):
        PretrainArgs(max_steps=-1).validate()
    with pytest.raises(ConfigError):
        PretrainArgs(block_len=2).validate()


def test_sft_learning_rate_warms_up_then_decays_linearly_to_the_final_ratio():
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.stages import continued_sft_args
    from searchgym.train.sft import SFTArgs, lr_factor

    f = lr_factor(SFTArgs(warmup_steps=10, final_lr_ratio=0.1), total=110)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(59) == pytest.approx(0.55) and f(109) == pytest.approx(0.1)
    assert all(lr_factor(SFTArgs(warmup_steps=1), total=50)(s) == 1.0 for s in range(50))  # constant by default
    with pytest.raises(ConfigError, match="final_lr_ratio"):
        SFTArgs(final_lr_ratio=0.0).validate()
    # the continued-SFT arm and the SFT refresh go on at the rate the warm start ended with, constant
    cfg = SqueezeConfig()
    c = continued_sft_args(cfg)
    assert c.learning_rate == pytest.approx(cfg.sft.learning_rate * cfg.sft.final_lr_ratio)
    assert c.final_lr_ratio == 1.0 and c.warmup_steps == 1
