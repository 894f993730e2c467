"""Hostile files and arguments given to the CLI and the trainer adapters (issue 24 items 7, 8, 9 and the
`--out` one): each ends in a typed, one-line error within a budget, never a traceback or a blow-up."""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

from .conftest import PYTHON, SEARCHGYM, no_traceback, run_measured

CLI_BUDGET_S = 240        # a CLI run that loads torch + a model on a loaded 2-core machine
TEMPLATE_BUDGET_S = 120


# --- --out naming an existing file ---------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [["data", "export-world", "--out"],
                                 pytest.param(["rollout", "--agent", "random", "-n", "1", "--out"],
                                              marks=pytest.mark.slow)])
def test_out_naming_an_existing_file_is_one_line(tmp_path, cmd):
    target = tmp_path / "taken"
    if cmd[0] == "rollout":  # writes a file: a folder is what is in the way
        target.mkdir()
        (target / "keep").write_text("mine\n")
    else:
        target.write_text("mine\n")
    rc, out, err, _, _ = run_measured([SEARCHGYM, *cmd, str(target)], timeout=CLI_BUDGET_S, cwd=tmp_path)
    assert rc != 0
    no_traceback(err)
    assert "Errno" not in err + out
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and str(target) in lines[0], err
    assert (target / "keep" if target.is_dir() else target).read_text() == "mine\n"  # nothing lost


# --- model directories ----------------------------------------------------------------------------------------
def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_safetensors(path: Path, edit) -> None:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    edit(header)
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])


def _rollout(model: Path, cwd: Path) -> tuple[int, str, str, float, float]:
    return run_measured([SEARCHGYM, "rollout", "--agent", str(model), "-n", "1", "--max-new-tokens", "4"],
                        timeout=CLI_BUDGET_S, cwd=cwd)


def _big_shape(h):
    h["model.embed_tokens.weight"]["shape"] = [100_000, 100_000]


def _far_offsets(h):
    h["model.embed_tokens.weight"]["data_offsets"] = [0, 10**12]


LIES = ["safetensors shape", "safetensors offsets", "config hidden_size", "config vocab_size"]


def _lie(tiny_model_dir: Path, tmp_path: Path, lie: str) -> Path:
    d = _copy(tiny_model_dir, tmp_path / "lm")
    if lie.startswith("safetensors"):
        _edit_safetensors(d / "model.safetensors", _big_shape if "shape" in lie else _far_offsets)
    else:
        cfg = json.loads((d / "config.json").read_text())
        key = lie.split()[1]
        cfg[key] = cfg[key] * 2 if key == "hidden_size" else 50_000_000
        (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("lie", LIES)
def test_a_lying_model_directory_is_refused_before_loading(tiny_model_dir, tmp_path, lie):
    from searchgym.agents.model_files import check_model_dir
    from searchgym.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="safetensors|config.json"):
        check_model_dir(_lie(tiny_model_dir, tmp_path, lie))
    check_model_dir(tiny_model_dir)  # the honest one passes


@pytest.mark.parametrize("lie", [LIES[0], *(pytest.param(lie, marks=pytest.mark.slow) for lie in LIES[1:])])
def test_a_lying_model_directory_is_a_typed_error(tiny_model_dir, tmp_path, lie):
    d = _lie(tiny_model_dir, tmp_path, lie)
    rc, _, err, peak_mb, _ = _rollout(d, tmp_path)
    assert rc != 0
    no_traceback(err)
    assert ("safetensors" in err or "config.json" in err), err[-2000:]
    assert peak_mb < 1500, f"peak RSS {peak_mb:.0f} MB"


LOOPING = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
           "{{ messages[0]['content'] }}")
TEMPLATES = {
    "nested loops": LOOPING,
    "output flood": "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxx{% endfor %}{% endfor %}",
    "string doubling": "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
                       "{% endfor %}{{ ns.s }}",
    "huge multiply": "{{ 'x' * 10000000000 }}",
    "raises": "{{ raise_exception('this template refuses') }}",
}


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_hostile_chat_template_is_refused_within_its_bounds(tiny_model_dir, name):
    from transformers import AutoTokenizer

    from searchgym.agents.chat_template import render_chat_template
    from searchgym.errors import ChatTemplateError

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tok.chat_template = TEMPLATES[name]
    with pytest.raises(ChatTemplateError, match="chat template"):
        render_chat_template(tok, [{"role": "user", "content": "q"}])


@pytest.mark.slow  # a rollout per template (about 16 s each); the in-bounds render check below stays fast
@pytest.mark.parametrize("name", list(TEMPLATES))
def test_a_hostile_chat_template_is_a_typed_error(tiny_model_dir, tmp_path, name):
    d = _copy(tiny_model_dir, tmp_path / "lm")
    (d / "chat_template.jinja").write_text(TEMPLATES[name])
    rc, _, err, peak_mb, _ = run_measured(
        [SEARCHGYM, "rollout", "--agent", str(d), "-n", "1", "--max-new-tokens", "4"], timeout=TEMPLATE_BUDGET_S,
        cwd=tmp_path)
    assert rc != 0
    no_traceback(err)
    assert "chat template" in err, err[-2000:]
    assert peak_mb < 1500, f"peak RSS {peak_mb:.0f} MB"


def test_a_good_chat_template_renders_as_transformers_does(tiny_model_dir):
    from transformers import AutoTokenizer

    from searchgym.agents.chat_template import render_chat_template

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | trim }}{{ eos_token }}"
                         "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")
    msgs = [{"role": "user", "content": " what is the capital? "}]
    assert render_chat_template(tok, msgs) == tok.apply_chat_template(msgs, tokenize=False,
                                                                     add_generation_prompt=True)


# --- trainer adapters ----------------------------------------------------------------------------------------
def _deep(depth: int) -> list:
    root: list = []
    node = root
    for _ in range(depth):
        child: list = []
        node.append(child)
        node = child
    return root


@pytest.mark.parametrize("ground_truth", [_deep(100_000), {"target": _deep(5_000)}, "[" * 100_000 + "]" * 100_000,
                                          "[" * 500 + "]" * 500])
def test_verl_compute_score_on_nested_input_is_a_typed_error(ground_truth):
    from searchgym.errors import InputLimitError
    from searchgym.integrations.verl_reward import compute_score

    with pytest.raises(InputLimitError, match="nested"):
        compute_score("searchgym_world", "<answer> x </answer>", ground_truth)
    nested_call = "<tool_call>" + "[" * 100_000 + "</tool_call>"  # a nested tool call is an invalid action
    assert compute_score("searchgym_world", nested_call, ["x"])["score"] == 0.0


def test_skyrl_non_integer_max_turns_is_a_typed_error():
    pytest.importorskip("skyrl_gym")
    from searchgym.errors import ConfigError
    from searchgym.integrations.skyrl import SearchgymTextEnv

    for env_config, extras in (({}, {"max_turns": "x"}), ({"max_turns": "x"}, {}), ({"top_k": [3]}, {})):
        with pytest.raises(ConfigError, match="must be an integer"):
            SearchgymTextEnv(env_config, extras)


ACTION_SCRIPT = """
import sys
from searchgym.envs import SearchEnv
env = SearchEnv()
env.reset(seed=0)
big = "a" * (1 << 20)
kind = sys.argv[1]
if kind == "dict":
    action = {"name": "search", "arguments": {"query_list": [big] * 700}}
elif kind == "object":
    from searchgym.envs.actions import SearchAction
    action = SearchAction(queries=[big] * 700)
else:
    action = [big] * 700
obs, reward, terminated, truncated, info = env.step(action)
print(info["kind"], "|", info.get("error"))
"""


@pytest.mark.parametrize("kind", ["dict", pytest.param("object", marks=pytest.mark.slow),
                                  pytest.param("list", marks=pytest.mark.slow)])
def test_a_huge_structured_action_is_refused_before_it_is_serialised(tmp_path, kind):
    rc, out, err, peak_mb, _ = run_measured([PYTHON, "-c", ACTION_SCRIPT, kind], timeout=CLI_BUDGET_S, cwd=tmp_path)
    assert rc == 0, err[-2000:]
    assert out.startswith("invalid |"), out
    # the env (embedded world + BM25) takes ~300 MB; serialising the action would add 700 MB or more
    assert peak_mb < 650, f"peak RSS {peak_mb:.0f} MB"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
