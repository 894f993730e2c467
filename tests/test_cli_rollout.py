"""rollout / eval on the command line: -n beyond the data needs --repeat; --api-key reaches the retrieval
server; --prompt-template and the prompt a squeeze-trained model directory carries."""

from __future__ import annotations

import json

import pytest
from helpers import load_server_fixture
from typer.testing import CliRunner

from searchgym.cli import app

live = load_server_fixture("live")


def _invoke(*args, env=None):
    return CliRunner().invoke(app, [*map(str, args)], env=env)


def test_n_beyond_the_split_is_an_error_unless_repeat(tmp_path):
    from searchgym.data import default_world

    n_dev = len(default_world().split("dev"))
    r = _invoke("eval", "--agent", "question", "-n", n_dev + 1, "--samples", 2, "--split", "dev", "--no-progress")
    assert r.exit_code == 2 and f"{n_dev} questions" in r.output and "--repeat" in r.output
    r = _invoke("rollout", "--agent", "question", "-n", 3, "--split", "dev", "--no-progress")
    assert r.exit_code == 0, r.output


def test_n_beyond_a_dataset_file_and_repeat(tmp_path):
    qs = [{"id": f"q{i}", "question": f"Who directed film {i}?", "golden_answers": ["x"]} for i in range(3)]
    f = tmp_path / "qa.jsonl"
    f.write_text("\n".join(json.dumps(q) for q in qs))
    s = tmp_path / "s.json"
    r = _invoke("rollout", "--agent", "question", "-n", 5, "--dataset", f, "--no-progress")
    assert r.exit_code == 2 and "3 questions" in r.output
    c = tmp_path / "corpus.jsonl"
    c.write_text("\n".join(json.dumps({"id": str(i), "title": f"Film {i}", "text": f"Film {i} was directed by x."})
                           for i in range(3)))
    r = _invoke("rollout", "--agent", "question", "--dataset", f, "--corpus", c, "--no-progress",
                "--summary-json", s)  # no -n: 100, or all 3 questions
    assert r.exit_code == 0, r.output
    assert json.loads(s.read_text())["episodes"] == 3
    r = _invoke("rollout", "--agent", "question", "-n", 5, "--dataset", f, "--repeat", "--no-progress")
    assert r.exit_code == 2 and "--corpus" in r.output and "corpus=" not in r.output  # CLI flags, not kwargs
    r = _invoke("rollout", "--agent", "question", "-n", 5, "--dataset", f, "--corpus", c, "--repeat",
                "--no-progress", "--summary-json", s)
    assert r.exit_code == 0, r.output
    assert json.loads(s.read_text())["episodes"] == 5


@pytest.fixture(scope="module")
def keyed_server():
    from searchgym.data import default_world
    from searchgym.retrieval import build_retriever
    from searchgym.retrieval.server import create_app

    retr = build_retriever(default_world().passages, kind="bm25")
    with live.LiveServer(create_app(retr, api_key="s3cret")) as srv:
        yield srv


def test_api_key_reaches_the_retrieval_server(keyed_server, tmp_path):
    url = keyed_server.url + "/retrieve"
    env = {"SEARCHGYM_API_KEY": ""}
    base = ["rollout", "--agent", "question", "-n", 2, "--split", "dev", "--retriever", url, "--no-progress",
            "--summary-json", tmp_path / "s.json"]
    r = _invoke(*base, env=env)
    assert r.exit_code != 0 and "Traceback" not in r.output
    r = _invoke(*base, "--api-key", "s3cret", env=env)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "s.json").read_text())["episodes"] == 2
    r = _invoke("eval", "--agent", "question", "-n", 2, "--samples", 2, "--split", "dev", "--retriever", url,
                "--no-progress", env={"SEARCHGYM_API_KEY": "s3cret"})
    assert r.exit_code == 0, r.output


def test_prompt_template_file_and_model_dir(tmp_path):
    from searchgym.agents.commands import _prepare_env
    from searchgym.train.model_meta import write_prompt_meta

    kw = {"env": "searchgym/SearchQA-v0", "split": None, "n": 1, "repeat": False, "corpus": None,
          "dataset": None, "fmt": None, "lenient": False, "retriever": None, "top_k": None, "max_turns": None,
          "preset": None, "api_key": None}
    tpl = tmp_path / "prompt.txt"
    tpl.write_text("Q: {question}\n")
    assert _prepare_env(agent="question", prompt_template=str(tpl), **kw)[0]["prompt_template"] == "Q: {question}\n"
    model = tmp_path / "model"
    model.mkdir()
    write_prompt_meta(model, "Question: {question}\n", max_turns=2, passage_chars=90)
    got = _prepare_env(agent=str(model), prompt_template=None, **kw)[0]
    assert got["prompt_template"] == "Question: {question}\n" and got["max_turns"] == 2
    assert got["passage_chars"] == 90
    # the flag wins over the saved template
    assert _prepare_env(agent=str(model), prompt_template="search_r1", **kw)[0]["prompt_template"] == "search_r1"
    bad = tmp_path / "bad.txt"
    bad.write_text("no placeholder")
    r = _invoke("rollout", "--agent", "question", "-n", 1, "--prompt-template", bad, "--no-progress")
    assert r.exit_code == 2 and "{question}" in r.output
    r = _invoke("rollout", "--agent", "question", "-n", 1, "--prompt-template", tpl, "--no-progress", "--show")
    assert r.exit_code == 0, r.output
