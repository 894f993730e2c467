"""What the framework adapters share: version checks, building the env, tool calls, diversity figures."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from searchgym.errors import ConfigError, FrameworkVersionError

# framework -> (distribution name, supported version range, extra that installs it)
SUPPORTED: dict[str, tuple[str, str, str]] = {
    "trl": ("trl", ">=1.16,<2", "trl"),
    "verl": ("verl", ">=0.9.1,<0.10", "verl"),
    "openenv": ("openenv-core", ">=0.3,<0.4", "openenv"),
    "skyrl": ("skyrl-gym", ">=0.4,<0.5", "skyrl"),
    "gem": ("gem-llm", ">=0.1,<0.2", "gem"),
}

# Set to 1 to try a framework version outside the tested range (at your own risk).
SKIP_VERSION_CHECK_ENV = "SEARCHGYM_SKIP_VERSION_CHECK"

# The reset prompt of the tool-calling adapters: the tools themselves come from the framework's chat template.
TOOL_PROMPT = (
    "Answer the given question. Use the search tool to look things up in the document collection (one "
    "query per call) and read the passages it returns; when you know the answer, call the answer tool with a "
    "short answer, e.g. <tool_call>{\"name\": \"answer\", \"arguments\": {\"answer\": \"Beijing\"}}</tool_call>. "
    "Question: {question}\n"
)

EPISODE_OVER = ("The episode is over (the answer was given or the step budget ran out); further tool calls "
                "are not taken.")
ANSWER_RECORDED = "Your answer has been recorded; the episode is over."


def require(framework: str) -> str:
    """Check that ``framework`` is installed at a supported version; return that version.

    Raises :class:`FrameworkVersionError` naming the supported range and the extra that installs it.
    """
    if framework not in SUPPORTED:
        raise ConfigError(f"unknown framework {framework!r}; searchgym integrates {sorted(SUPPORTED)}")
    dist, spec, extra = SUPPORTED[framework]
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(dist)
    except PackageNotFoundError:
        raise FrameworkVersionError(
            f"{dist} is not installed; searchgym.integrations.{framework} supports {dist}{spec}: "
            f"pip install 'searchgym[{extra}]'") from None
    if os.environ.get(SKIP_VERSION_CHECK_ENV) == "1":
        return found
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        ok = Version(found) in SpecifierSet(spec)
    except InvalidVersion:
        ok = False
    if not ok:
        raise FrameworkVersionError(
            f"{dist} {found} is not supported by searchgym.integrations.{framework}; supported versions: "
            f"{dist}{spec} (pip install 'searchgym[{extra}]'), or set {SKIP_VERSION_CHECK_ENV}=1 to try anyway")
    return found


def build_env(corpus: Any = None, dataset: Any = None, *, split: str | None = None, retriever: Any = None,
              **env_kwargs: Any) -> Any:
    """A ``SearchEnv`` in the tool-calling style (chat observations, tool-call corrective messages).

    The retriever is memoised by ``searchgym.envs.sources``, so every env built from the same inputs in a
    process shares one index.
    """
    from searchgym.envs import SearchEnv

    env_kwargs.setdefault("prompt_template", TOOL_PROMPT)
    env_kwargs.setdefault("observation_format", "chat")
    return SearchEnv(corpus=corpus, dataset=dataset, retriever=retriever, split=split, **env_kwargs)


def tool_step(env: Any, name: str, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Run one tool call (``search`` / ``answer``) through ``env.step``; never raises on bad arguments.

    Returns the text for the model and the step's info (None when no step was taken). An invalid call
    gets the env's corrective message plus what was wrong.
    """
    if env.example is None:
        return "No question has been posed yet (the environment was not reset).", None
    if env.done:
        return EPISODE_OVER, None
    obs, _reward, _term, _trunc, info = env.step({"name": name, "arguments": dict(arguments)})
    if info["kind"] == "invalid":
        err = info.get("error")
        text = obs.strip()
        return (f"{text}\n(Error: {err}.)" if err else text), info
    if info["kind"] == "answer":
        return ANSWER_RECORDED, info
    return obs, info


def close_episode(env: Any) -> None:
    """End an episode the agent left without answering: it is truncated, scored as the env scores it."""
    if env.example is None:
        return
    guard = 0
    while not env.done and guard <= env.max_steps:
        env.step("")  # an empty action is invalid; the env truncates after max_steps actions
        guard += 1


def episode_reward(env: Any) -> float:
    """The episode's return (closing it first if the agent never answered)."""
    if env.example is None:
        return 0.0
    close_episode(env)
    return float(env.trajectory().reward)


def world_titles(corpus: Any, world_seed: int = 0) -> list[str]:
    """Entity titles for the tracker's slot level: the world's when the env runs on the embedded world."""
    if corpus is not None:
        return []
    from searchgym.data import default_world

    return list(default_world(seed=world_seed).titles)


def new_tracker(titles: Iterable[str] = (), levels: Sequence[str] = ("string", "slot"),
                log_dir: str | os.PathLike | None = None) -> Any:
    from searchgym.diversity import DiversityTracker

    return DiversityTracker(levels=tuple(levels), titles=titles, log_dir=log_dir, tensorboard=False)


def diversity_figures(tracker: Any, step: int, trajectories: Sequence[Any],
                      which: str | Sequence[str] = "default") -> dict[str, float]:
    """Feed one batch of trajectories to the tracker; return its finite ``diversity/*`` figures: the default
    dozen (:data:`searchgym.diversity.keys.DEFAULT_KEYS`), ``"all"`` or the listed keys / prefixes."""
    from searchgym.diversity.keys import select

    if not trajectories:
        return {}
    metrics = tracker.update(int(step), list(trajectories))
    return select({k: float(v) for k, v in metrics.items()
                   if k.startswith("diversity/") and isinstance(v, (int, float)) and math.isfinite(v)}, which)


def _first(row: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        v = row.get(k)
        if v is not None:
            return v
    extra = row.get("extra_info")
    if isinstance(extra, Mapping):
        for k in keys:
            if extra.get(k) is not None:
                return extra[k]
    return None


def question_options(env: Any, row: Mapping[str, Any], cache: dict[str, Any]) -> dict[str, Any] | None:
    """``reset`` options for a data row: its ``index`` (checked against ``question_id``), its ``question_id``,
    or a question built from ``question`` + answers; None when the row names no question.

    Reads the columns of ``make_dataset`` and of the exported verl/Search-R1 parquet (``id``,
    ``golden_answers``, ``reward_model.ground_truth.target``, ``extra_info.index``). ``cache`` memoises the
    id -> index map.
    """
    qid = _first(row, "question_id", "id")
    idx = _first(row, "index")
    examples = env.examples
    if isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(examples) and (
            qid is None or str(examples[idx].id) == str(qid)):
        return {"index": idx}
    if qid is not None:
        ids = cache.get("ids")
        if ids is None:
            ids = cache["ids"] = {str(ex.id): i for i, ex in enumerate(examples)}
        if str(qid) in ids:
            return {"index": ids[str(qid)]}
    question = row.get("question")
    answers = _first(row, "answers", "golden_answers")
    if answers is None:
        spec = row.get("reward_spec") or row.get("reward_model")
        gt = spec.get("ground_truth") if isinstance(spec, Mapping) else None
        answers = gt.get("target") if isinstance(gt, Mapping) else gt
    if isinstance(question, str) and question and answers is not None:
        from searchgym.data import QAExample

        if hasattr(answers, "tolist"):
            answers = answers.tolist()
        answers = [answers] if isinstance(answers, str) else [str(a) for a in answers]
        return {"example": QAExample(id=str(qid if qid is not None else "row"), question=question,
                                     answers=answers)}
    if qid is not None:
        raise ConfigError(f"question_id {qid!r} is not in this environment's dataset and the row has no "
                          f"'question' and answers; build the env with the dataset the rows came from")
    return None
