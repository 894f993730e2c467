"""TRL: ``SearchgymToolEnv`` for ``GRPOTrainer(environment_factory=...)`` (TRL >= 1.16).

Example (offline, the embedded world)::

    from trl import GRPOConfig, GRPOTrainer
    from searchgym.integrations.trl import SearchgymToolEnv, diversity_reward, make_dataset

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer,
        train_dataset=make_dataset(split="train", n=256),
        environment_factory=SearchgymToolEnv,          # or env_factory(corpus=..., dataset=...)
        reward_funcs=[diversity_reward()],             # logs diversity/* ; adds 0 to the reward
        args=GRPOConfig(reward_weights=[0.0], ...),    # the env's get_reward() is added with weight 1
    )

TRL exposes the env's public methods as tools: ``search(query)`` and ``answer(answer)``. Each call is one
``SearchEnv.step``; a call with a missing or wrong-typed argument gets the env's corrective message back
(never an exception). ``get_reward()`` is the env's episode return; an episode the model left without
calling ``answer`` is closed as truncated first.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from searchgym.errors import ConfigError
from searchgym.integrations._common import (
    build_env,
    diversity_figures,
    episode_reward,
    new_tracker,
    question_options,
    require,
    tool_step,
    world_titles,
)

require("trl")  # TRL < 1.16 has no environment_factory: say which versions work, at import

_MISSING: Any = object()


def _schema_requires(*names: str) -> Callable[[Callable], Callable]:
    """Show ``names`` as required in the tool schema while the method still accepts a missing argument.

    TRL calls a tool as ``fn(**arguments)``; a required Python parameter would turn a call without it
    into a TypeError that TRL reports as a bare failure. With a sentinel default the env answers instead.
    """
    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = [p.replace(default=inspect.Parameter.empty) if p.name in names else p
                  for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        fn.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        keep = {p.name for p in params} | {"return"}
        fn.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k in keep}
        return fn
    return deco


class SearchgymToolEnv:
    """One searchgym episode per TRL rollout; ``search`` and ``answer`` are its tools.

    Args: those of :class:`~searchgym.envs.SearchEnv` (``corpus``, ``dataset``, ``split``, ``retriever``,
    ``top_k``, ``max_turns``, ``reward``, ...). Instances built from the same inputs share one retriever;
    pickling keeps only the arguments (the retriever is rebuilt, or found memoised, on the other side).
    """

    def __init__(self, corpus: Any = None, dataset: Any = None, *, split: str | None = None, retriever: Any = None,
                 **env_kwargs: Any):
        self._config = {"corpus": corpus, "dataset": dataset, "split": split, "retriever": retriever,
                        **env_kwargs}
        self.env = build_env(corpus, dataset, split=split, retriever=retriever, **env_kwargs)
        self._cache: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self._config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"SearchgymToolEnv(split={self._config['split']!r}, questions={len(self.env.examples)})"

    # -- the TRL contract ---------------------------------------------------------------------------
    def reset(self, **row: Any) -> str | None:
        """Pose the row's question (by ``index``/``question_id``); return the prompt when the row has none."""
        options = self._options(row)
        if options is None and row.get("prompt"):
            raise ConfigError("the row has a prompt but names no question (no index/question_id, or question + "
                              "answers), so the env cannot know what it asks; build rows with make_dataset")
        obs, _info = self.env.reset(options=options)
        return None if row.get("prompt") else obs

    @_schema_requires("query")
    def search(self, query: str = _MISSING, **unexpected: Any) -> str:
        """Search the document collection and return the top passages.

        Args:
            query: One search query, for example the name of an entity and the attribute you need.

        Returns:
            The retrieved passages, between <information> and </information>.
        """
        args = {} if query is _MISSING else {"query": query}
        args.update(unexpected)
        return tool_step(self.env, "search", args)[0]

    @_schema_requires("answer")
    def answer(self, answer: str = _MISSING, **unexpected: Any) -> str:
        """Give the final answer to the question; this ends the episode.

        Args:
            answer: The short final answer, for example a name, a number or a year.

        Returns:
            A confirmation that the answer was recorded.
        """
        args = {} if answer is _MISSING else {"answer": answer}
        args.update(unexpected)
        return tool_step(self.env, "answer", args)[0]

    def get_reward(self) -> float:
        """The episode's return under the env's reward (exact match by default)."""
        return episode_reward(self.env)

    # -- helpers (private: TRL turns every public method into a tool) ---------------------------------
    def _options(self, row: dict[str, Any]) -> dict[str, Any] | None:
        return question_options(self.env, row, self._cache)

    @property
    def trajectory(self) -> Any:
        """The current (or last) episode as a :class:`~searchgym.trajectory.Trajectory`."""
        return self.env.trajectory()


def env_factory(corpus: Any = None, dataset: Any = None, *, split: str | None = None, **env_kwargs: Any
                ) -> Callable[[], SearchgymToolEnv]:
    """A picklable ``environment_factory`` for the given SearchEnv arguments."""
    return functools.partial(SearchgymToolEnv, corpus, dataset, split=split, **env_kwargs)


def make_dataset(split: str = "train", n: int | None = None, corpus: Any = None, dataset: Any = None, *,
                 seed: int | None = 0, prompt_template: Any = None, world_seed: int = 0) -> Any:
    """A ``datasets.Dataset`` of conversational prompts for ``GRPOTrainer``.

    Columns: ``prompt`` (one user message: instructions + question), and what ``reset(**row)`` needs:
    ``question_id``, ``index``, plus ``question``, ``answers`` and ``family`` for reward functions and logs.
    ``n`` keeps the first ``n`` questions after shuffling with ``seed`` (``seed=None``: file order).
    """
    try:
        import datasets
    except ImportError:
        from searchgym.errors import FrameworkVersionError

        raise FrameworkVersionError("make_dataset needs the `datasets` package: pip install 'searchgym[trl]'") \
            from None
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ConfigError(f"n must be a positive integer or None, got {n!r}")
    kw: dict[str, Any] = {"world_seed": world_seed}
    if prompt_template is not None:
        kw["prompt_template"] = prompt_template
    env = build_env(corpus, dataset, split=split, **kw)
    order = list(range(len(env.examples)))
    if seed is not None:
        import random

        random.Random(seed).shuffle(order)
    if n is not None:
        order = order[:n]
    rows: dict[str, list[Any]] = {k: [] for k in ("prompt", "question_id", "index", "question", "answers",
                                                  "family")}
    for i in order:
        ex = env.examples[i]
        rows["prompt"].append([{"role": "user", "content": env.prompt(ex)}])
        rows["question_id"].append(str(ex.id))
        rows["index"].append(i)
        rows["question"].append(ex.question)
        rows["answers"].append([str(a) for a in ex.answers])
        rows["family"].append(str((ex.metadata or {}).get("family") or ""))
    return datasets.Dataset.from_dict(rows)


def diversity_reward(tracker: Any = None, *, titles: Iterable[str] | None = None,
                     levels: Sequence[str] = ("string", "slot"), log_dir: Any = None,
                     diversity_metrics: str | Sequence[str] = "default") -> Callable[..., list[float]]:
    """A reward function that scores 0 and logs the batch's query diversity as ``diversity/*``.

    Each call feeds the episodes of the batch (the groups of GRPO rollouts of each question) to a
    :class:`~searchgym.diversity.DiversityTracker` and logs its figures through TRL's ``log_metric``:
    the default dozen (``docs/metrics.md``), or every figure with ``diversity_metrics="all"`` (or a list of
    keys and prefixes). The tracker's ``log_dir`` (when given) always gets every figure.
    Give it weight 0 in ``GRPOConfig.reward_weights`` (it returns zeros either way).
    """
    from searchgym.diversity.keys import select

    select({}, diversity_metrics)  # a bad value fails here, not at the first logging step
    if tracker is None:
        tracker = new_tracker(world_titles(None) if titles is None else titles, levels, log_dir)
    calls = [0]

    def diversity(prompts: Any = None, completions: Any = None, environments: Any = None, log_metric: Any = None,
                  trainer_state: Any = None, **_: Any) -> list[float]:
        n = len(completions) if completions is not None else len(environments or ())
        envs = [e for e in (environments or ()) if isinstance(e, SearchgymToolEnv) and e.env.example is not None]
        step = int(getattr(trainer_state, "global_step", calls[0]))
        calls[0] += 1
        figures = diversity_figures(tracker, step, [e.trajectory for e in envs], diversity_metrics)
        if log_metric is not None:
            for name, value in figures.items():
                log_metric(name, value)
        diversity.last = figures  # type: ignore[attr-defined]
        return [0.0] * n

    diversity.tracker = tracker  # type: ignore[attr-defined]
    diversity.last = {}  # type: ignore[attr-defined]
    return diversity


__all__ = ["SearchgymToolEnv", "diversity_reward", "env_factory", "make_dataset"]
