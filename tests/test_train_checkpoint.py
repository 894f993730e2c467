"""Checkpoints without pickle: safetensors + JSON round trip (optimizer, RNG, extra), tampered and legacy
extra.pt files, and the swap's crash window."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from searchgym.errors import CheckpointError
from searchgym.train.checkpoint import (
    cleanup_partial,
    is_complete,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


def _model():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16))


def _trained(model):
    head = torch.nn.Linear(16, 1)
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    for _ in range(2):
        out = model(torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]]))
        (out.loss + head(torch.ones(16)).sum()).backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    return head, opt, sched


def _draws():
    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]


def test_round_trip_is_exact_and_holds_no_pickle(tmp_path):
    model = _model()
    head, opt, sched = _trained(model)
    ck = save_checkpoint(tmp_path / "ck", model=model, optimizer=opt, state={"step": 2, "history": [{"a": 1.5}]},
                         extra={"value_head": head.state_dict(), "scheduler": sched.state_dict(),
                                "odd": {1: (2, "x"), "t": (np.arange(3, dtype=np.int64),)}})
    after_save = _draws()
    names = {p.name for p in ck.rglob("*") if p.is_file()}
    assert not any(n.endswith((".pt", ".pkl", ".pickle", ".bin")) for n in names), names
    assert {"tensors.safetensors", "extra.json", "state.json", "COMPLETE"} <= names
    c = load_checkpoint(ck)
    set_rng_state(c["rng"])
    assert _draws() == after_save  # python, numpy and torch generators all restored exactly
    sd = opt.state_dict()
    assert c["optimizer"]["param_groups"] == sd["param_groups"]
    for k, st in sd["state"].items():
        for name, v in st.items():
            assert torch.equal(c["optimizer"]["state"][k][name], v)
    opt2 = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-2)
    opt2.load_state_dict(c["optimizer"])  # the real consumer accepts it
    head2 = torch.nn.Linear(16, 1)
    head2.load_state_dict(c["extra"]["value_head"])
    assert torch.equal(head2.weight, head.weight)
    assert c["extra"]["scheduler"] == sched.state_dict()
    assert c["extra"]["odd"][1] == (2, "x") and c["extra"]["odd"]["t"][0].tolist() == [0, 1, 2]
    assert c["state"]["step"] == 2 and c["state"]["history"] == [{"a": 1.5}]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_rng_state_is_saved(tmp_path):
    ck = save_checkpoint(tmp_path / "ck", model=_model())
    after = torch.rand(3, device="cuda").tolist()
    set_rng_state(load_checkpoint(ck)["rng"])
    assert torch.rand(3, device="cuda").tolist() == after


class _Payload:
    """Unpickling this object writes a file: stands in for arbitrary code in a tampered run directory."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (Path.write_text, (Path(self.target), "pwned"))


def _legacy(ck: Path, blob) -> None:
    """Turn a checkpoint into the format-1 layout (extra.pt + state.json version 1) as older searchgym wrote."""
    for f in ("tensors.safetensors", "extra.json"):
        (ck / f).unlink()
    torch.save(blob, ck / "extra.pt")
    st = json.loads((ck / "state.json").read_text())
    st["format_version"] = 1
    (ck / "state.json").write_text(json.dumps(st))


def test_tampered_legacy_checkpoint_runs_no_code(tmp_path):
    ck = save_checkpoint(tmp_path / "ck", model=_model(), state={"step": 1})
    target = tmp_path / "pwned.txt"
    _legacy(ck, {"optimizer": None, "rng": rng_state(), "extra": {"x": _Payload(str(target))}})
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        load_checkpoint(ck)
    assert not target.exists()


def test_tampered_new_checkpoint_ignores_a_planted_extra_pt(tmp_path):
    ck = save_checkpoint(tmp_path / "ck", model=_model(), state={"step": 1})
    target = tmp_path / "pwned.txt"
    torch.save({"x": _Payload(str(target))}, ck / "extra.pt")
    assert load_checkpoint(ck)["state"]["step"] == 1
    assert not target.exists()


def test_benign_legacy_checkpoint_still_loads(tmp_path):
    model = _model()
    head, opt, _ = _trained(model)
    ck = save_checkpoint(tmp_path / "ck", model=model, state={"step": 7})
    _legacy(ck, {"optimizer": opt.state_dict(), "rng": rng_state(), "extra": {"value_head": head.state_dict()}})
    after = _draws()
    c = load_checkpoint(ck)
    assert c["state"]["step"] == 7 and torch.equal(c["extra"]["value_head"]["weight"], head.weight)
    set_rng_state(c["rng"])
    assert _draws() == after


def test_unstorable_extra_is_a_typed_error_and_leaves_the_old_checkpoint(tmp_path):
    ck = save_checkpoint(tmp_path / "ck", model=_model(), state={"step": 1})
    with pytest.raises(CheckpointError, match="object"):
        save_checkpoint(ck, model=_model(), state={"step": 2}, extra={"bad": object()})
    assert load_checkpoint(ck)["state"]["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ck"]


def test_interrupted_two_rename_swap_keeps_the_only_copy(tmp_path):
    """A writer killed between moving the old copy aside and moving the new one in: readers use the parked
    copy and cleanup_partial renames it back instead of deleting it."""
    ck = save_checkpoint(tmp_path / "ck", model=_model(), state={"step": 3})
    parked = tmp_path / "ck.old-999999999-abcd1234"  # a writer pid that is not running
    os.replace(ck, parked)
    assert load_checkpoint(ck)["state"]["step"] == 3
    cleanup_partial(tmp_path)
    assert is_complete(ck) and not parked.exists()
    assert load_checkpoint(ck)["state"]["step"] == 3


def test_corrupt_tensor_file_is_a_checkpoint_error(tmp_path):
    ck = save_checkpoint(tmp_path / "ck", model=_model(), optimizer=_trained(_model())[1], state={"step": 1})
    (ck / "tensors.safetensors").write_bytes(b"\x00" * 5)
    with pytest.raises(CheckpointError, match="cannot be read"):
        load_checkpoint(ck)
