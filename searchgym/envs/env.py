"""SearchEnv: the multi-turn search-then-answer environment (Gymnasium API)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from searchgym.envs.actions import ANSWER, INVALID, SEARCH, ParsedAction, parse_action
from searchgym.envs.prompts import PassageFormatter, PromptBuilder
from searchgym.envs.sources import (
    WORLD_SPLITS,
    check_dataset_given,
    resolve_dataset,
    resolve_retriever,
    world_key,
)
from searchgym.envs.spaces import UnicodeText
from searchgym.errors import ConfigError, QueryError, SearchGymError
from searchgym.rewards import RewardContext, make_reward
from searchgym.rewards.normalize import normalize_answer
from searchgym.trajectory import Step, Trajectory

MAX_ACTION_CHARS = 1 << 22  # 4M characters: larger actions are still handled (invalid), just outside the space
MAX_OBSERVATION_CHARS = 1 << 20
# Recorded actions (Step.action, the render transcript) keep at most this many characters: a finished
# trajectory must not pin a multi-megabyte raw action in memory or in a JSONL file.
MAX_RECORDED_ACTION_CHARS = 1 << 15


def clip_action(raw: str, limit: int) -> str:
    """``raw`` cut to ``limit`` characters, with a marker saying how long it was."""
    if len(raw) <= limit:
        return raw
    return raw[:limit] + f"...[truncated: {len(raw):,} characters]"


class ResetNeeded(gym.error.ResetNeeded, SearchGymError):
    """``step()`` was called before ``reset()`` or after the episode ended."""


class SearchEnv(gym.Env[str, Any]):
    r"""A question-answering episode in which the agent searches a corpus, reads passages and answers.

    ## Description

    Each episode poses one question from a QA dataset (by default the embedded procedural world, whose
    questions come in several families: one-hop attribute, two-hop bridge, comparison, ...). The agent
    acts in text, in the grammar of Search-R1: it thinks, searches with ``<search> query </search>``,
    reads the top-k passages that come back between ``<information>`` and ``</information>``, and
    finally answers with ``<answer> ... </answer>``. The reward compares the answer with the gold
    answers (exact match by default). Retrieval runs on a local BM25, dense FAISS or hybrid index, or on a
    Search-R1-compatible HTTP server.

    ## Action Space

    ``UnicodeText(0, 4194304)`` (a ``gymnasium.spaces.Text`` that admits any character). An action is the
    agent's raw text; the **first complete tag wins** (the earliest closing ``</search>``, ``</answer>`` or
    ``</tool_call>``), and the text before it is the agent's thinking:

    - ``<search> query </search>``: a search (costs one of the ``max_turns`` searches);
    - ``<answer> text </answer>``: the final answer (ends the episode);
    - ``<tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>`` (or ``"query_list":
      ["q1", "q2"]``, searched in parallel as one turn) and ``<tool_call>{"name": "answer", "arguments":
      {"answer": "a"}}</tool_call>`` (OpenAI/Qwen function-call style);
    - a :class:`~searchgym.envs.actions.SearchAction` / :class:`~searchgym.envs.actions.AnswerAction`
      object, or a ``{"name": ..., "arguments": ...}`` dict, for programmatic agents.

    Anything else (no complete tag, an empty or over-long query, malformed tool-call JSON, wrong argument
    types, a non-text object) is an invalid action: the observation is Search-R1's corrective message
    ("My previous action is invalid. ...") and the step reward is ``-invalid_penalty``. ``info["error"]``
    says what was wrong. Parsing never raises.

    ## Observation Space

    ``UnicodeText(0, 1048576)``. ``reset`` returns the prompt (instructions + question). After a search
    the observation is Search-R1's ``"\n\n<information>Doc 1(Title: \"t\") text\nDoc 2(...) ...
    </information>\n\n"`` (several queries in one turn: their doc lists joined by ``---``). After an
    invalid action it is the corrective message; after the answer it is ``""``. Passages are truncated to
    ``passage_chars`` characters or ``passage_tokens`` tokens. With ``observation_format="chat"`` the
    observation has no surrounding blank lines (``"<information>...</information>"``) and ``info["messages"]`` holds it as a
    chat message (``role`` ``"user"`` for the prompt, ``"tool"``/``"user"`` for results).

    ## Rewards

    Step rewards are 0 for a search, ``-invalid_penalty`` for an invalid action, and, on the step that ends
    the episode (the answer, or truncation without one), the episode reward ``reward(ctx)``: by default
    exact match (1 or 0) of the answer against the gold answers after SQuAD normalisation. ``reward`` takes
    a name (``"em"``, ``"sub_em"``, ``"f1"``, ``"format"``, ``"search_cost"``, ``"retrieval_hit"``), an
    expression (``"em + 0.2*format - 0.05*search_cost"``), a list or ``{name: weight}`` dict, or a callable
    (see :mod:`searchgym.rewards`). Truncation without an answer scores the empty prediction (EM 0) plus
    any shaping terms.

    ## Starting State

    ``reset(seed=s)`` shuffles the dataset with ``s`` and poses the first question; each later ``reset()``
    poses the next question of that order (reshuffled after each pass). ``shuffle=False`` keeps file order.
    ``options={"index": i}``, ``{"question_id": qid}`` or ``{"example": QAExample}`` pose a given question
    (what GRPO needs to roll out one question k times).

    ## Episode End

    The episode **terminates** when the agent answers. It is **truncated** when ``max_steps`` actions
    (default ``max_turns + 1``: every search plus the answer) have been taken without an answer; invalid
    actions count as steps. A search after ``max_turns`` searches is refused (no retrieval): the
    observation tells the agent to answer, and it counts as an invalid action. After the search that uses
    the last of the budget, the observation ends with a note that the budget is spent (``budget_notice``).
    Calling ``step`` after the episode ended raises :class:`ResetNeeded` (a
    ``gymnasium.error.ResetNeeded``).

    ## Arguments

    - ``corpus``: ``None`` (the embedded world), a corpus file (Search-R1 jsonl, ``{id,title,text}`` jsonl,
      parquet), an index directory (``searchgym index build``), or a list of ``Passage``.
    - ``dataset``: ``None`` (the world's ``split``), a world split name (``train``, ``dev``, ``test``,
      ``shift_phrasing``, ``shift_family``, ``shift_type``, ``shift_strategy``; ``shift_renamed`` and
      ``shift_homonym`` in a version-3 world), a QA file in any format ``load_qa`` reads, or
      a list of ``QAExample``. A file needs ``corpus=`` (or a retriever URL/object).
    - ``retriever``: ``"bm25"``, ``"dense"``, ``"hybrid"``, an ``http://`` URL of a ``/retrieve`` server,
      or any object with ``search``/``batch_search``. Default ``None``: BM25 over a corpus, or whatever an
      index directory holds (dense + BM25 indexes load as hybrid).
    - ``retriever_kwargs``: passed to ``build_retriever``/``load_index``/``RemoteRetriever``.
    - ``split``: the world split (default ``"train"``), also recorded in infos and trajectories. With a
      ``corpus`` or ``retriever`` of your own, name ``dataset`` or ``split``: otherwise ``ConfigError``.
    - ``top_k``: passages per search (default 3). ``max_turns``: searches per episode (default 4).
    - ``max_steps``: actions per episode before truncation (default ``max_turns + 1``).
    - ``reward``: the reward spec (default ``"em"``). ``invalid_penalty``: subtracted per invalid action
      (default 0.0, as in Search-R1).
    - ``prompt_template``: ``"search_r1"`` (default), ``"tool_call"``, a string containing ``{question}``
      or a callable(example) -> str.
    - ``observation_format``: ``"search_r1"`` (default) or ``"chat"``.
    - ``passage_chars`` / ``passage_tokens`` / ``tokenizer``: passage truncation budget.
    - ``cache``: wrap the retriever in a ``CachedRetriever`` (``True`` or a max size).
    - ``shuffle``: shuffle the question order (default True). ``budget_notice``: default True.
    - ``world_seed``: seed of the embedded world (default 0). ``render_mode``: ``None`` or ``"ansi"``.
    - ``world_version`` / ``world_entities``: generator version and size of the world (default: the embedded
      world, version 2 with 1,500 entities; version 3 when the split is ``shift_renamed`` or ``shift_homonym``,
      which only version 3 has). The squeeze experiment's world is version 3 with 4,000 entities.
    - ``record_action_chars``: recorded actions (trajectory steps, the render transcript) are cut to this
      many characters (default 32,768; the full action is still parsed).

    ## Example

    >>> import gymnasium as gym, searchgym
    >>> env = gym.make("searchgym/SearchQA-v0")
    >>> obs, info = env.reset(seed=0)
    >>> obs.startswith("Answer the given question.") and info["question"] in obs
    True
    >>> obs, reward, terminated, truncated, info = env.step("<think>...</think><search> capital city </search>")
    >>> info["kind"], obs.lstrip().startswith("<information>Doc 1(Title:")
    ('search', True)
    >>> obs, reward, terminated, truncated, info = env.step("<answer> no idea </answer>")
    >>> terminated, reward, info["em"]
    (True, 0.0, 0)
    >>> env.unwrapped.trajectory().num_searches
    1
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 - as gymnasium.Env

    def __init__(
        self,
        corpus: Any = None,
        dataset: Any = None,
        retriever: Any = None,
        *,
        split: str | None = None,
        top_k: int = 3,
        max_turns: int = 4,
        max_steps: int | None = None,
        reward: Any = "em",
        invalid_penalty: float = 0.0,
        prompt_template: Any = "search_r1",
        observation_format: str = "search_r1",
        passage_chars: int | None = None,
        passage_tokens: int | None = None,
        tokenizer: Any = None,
        cache: bool | int = False,
        retriever_kwargs: dict[str, Any] | None = None,
        shuffle: bool = True,
        budget_notice: bool = True,
        world_seed: int = 0,
        world_version: int | None = None,
        world_entities: int | None = None,
        render_mode: str | None = None,
        record_action_chars: int = MAX_RECORDED_ACTION_CHARS,
    ):
        # a corpus or retriever of the user's own needs its questions named (dataset= or a world split), here and
        # not only in gym.make: otherwise the world's questions are asked against the user's passages
        check_dataset_given({"corpus": corpus, "dataset": dataset, "retriever": retriever, "split": split})
        split = "train" if split is None else split
        if not isinstance(top_k, (int, np.integer)) or top_k < 1:
            raise ConfigError(f"top_k must be a positive integer, got {top_k!r}")
        if not isinstance(max_turns, (int, np.integer)) or max_turns < 0:
            raise ConfigError(f"max_turns must be a non-negative integer, got {max_turns!r}")
        if max_steps is None:
            max_steps = int(max_turns) + 1
        if not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
            raise ConfigError(f"max_steps must be a positive integer, got {max_steps!r}")
        if observation_format not in ("search_r1", "chat"):
            raise ConfigError(f"observation_format must be 'search_r1' or 'chat', got {observation_format!r}")
        if not isinstance(record_action_chars, (int, np.integer)) or record_action_chars < 1:
            raise ConfigError(f"record_action_chars must be a positive integer, got {record_action_chars!r}")
        self.record_action_chars = int(record_action_chars)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be None or one of {self.metadata['render_modes']}")
        self.top_k, self.max_turns, self.max_steps = int(top_k), int(max_turns), int(max_steps)
        self.invalid_penalty = float(invalid_penalty)
        self.observation_format = observation_format
        self.budget_notice = bool(budget_notice)
        self.shuffle = bool(shuffle)
        self.render_mode = render_mode

        world = world_key(world_seed, world_version, world_entities,
                          dataset if isinstance(dataset, str) and dataset in WORLD_SPLITS else split)
        self.examples, self.split = resolve_dataset(dataset, split, world)
        if not self.examples:
            raise ConfigError(f"the dataset {dataset if dataset is not None else split!r} has no questions")
        self.retriever = resolve_retriever(retriever, corpus, dataset, world, retriever_kwargs, cache)
        self.reward_fn = make_reward(reward)
        self.prompt = PromptBuilder(prompt_template)
        self.formatter = PassageFormatter(passage_chars, passage_tokens, tokenizer)
        self._norm_cache: dict[int, tuple[Any, list[str]]] = {}  # normalised gold answers per example
        self._invalid_obs = self._wrap_text(self.prompt.invalid_message)
        self._budget_obs = self._wrap_text(self.prompt.budget_message(self.max_turns))
        # appended after the information block (chat form: on its own line)
        self._budget_notice = "\n" + self._budget_obs if observation_format == "chat" else self._budget_obs
        self._tool_role = "tool" if self.prompt.style == "tool_call" else "user"

        self.action_space = UnicodeText(MAX_ACTION_CHARS)
        self.observation_space = UnicodeText(MAX_OBSERVATION_CHARS)

        self._order: np.ndarray | None = None
        self._cursor = 0
        self._ex: Any = None
        self._done = True
        self._episode_index = -1
        self._uid = uuid.uuid4().hex[:12]  # episode ids: "<env uid>-<episode index>", unique across envs
        self._seed: int | None = None
        self._steps: list[Step] = []
        self._last_traj: Trajectory | None = None
        self._transcript: list[str] = []

    # -- reset ----------------------------------------------------------------------------------------
    def _next_index(self, options: dict[str, Any] | None) -> tuple[int, Any]:
        if options:
            if "example" in options:
                return -1, options["example"]
            if "index" in options:
                i = int(options["index"])
                if not 0 <= i < len(self.examples):
                    raise ConfigError(f"options['index'] must be in [0, {len(self.examples)}), got {i}")
                return i, self.examples[i]
            if "question_id" in options:
                qid = str(options["question_id"])
                for i, ex in enumerate(self.examples):
                    if ex.id == qid:
                        return i, ex
                raise ConfigError(f"no question with id {qid!r} in this dataset")
        n = len(self.examples)
        if self._order is None or self._cursor >= n:
            self._order = self.np_random.permutation(n) if self.shuffle else np.arange(n)
            self._cursor = 0
        i = int(self._order[self._cursor])
        self._cursor += 1
        return i, self.examples[i]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._order = None
        self._seed = seed
        index, ex = self._next_index(options)
        self._begin(ex, index)
        obs = self.prompt(ex)
        if len(obs) > MAX_OBSERVATION_CHARS:
            obs = obs[:MAX_OBSERVATION_CHARS]
        info = self._reset_info(index)
        if self.observation_format == "chat":
            info["messages"] = [{"role": "user", "content": obs}]
        if self.render_mode is not None:
            self._transcript = [obs]
        return obs, info

    def _begin(self, ex: Any, index: int) -> None:
        self._ex = ex
        self._index = index
        self._answers = list(ex.answers)
        self._gold = frozenset(str(s) for s in (ex.supporting_ids or ()))
        meta = ex.metadata or {}
        self._family = meta.get("family")
        self._hops = meta.get("hops")
        self._num_searches = 0
        self._num_invalid = 0
        self._t = 0
        self._return = 0.0
        self._retrieved: set[str] = set()
        self._steps = []
        self._done = False
        self._episode_index += 1
        self._episode_id = f"{self._uid}-{self._episode_index}"

    def _reset_info(self, index: int) -> dict[str, Any]:
        ex = self._ex
        return {"question": ex.question, "question_id": str(ex.id), "family": self._family,
                "hops": self._hops, "split": (ex.metadata or {}).get("split", self.split), "index": index,
                "episode_id": self._episode_id, "max_turns": self.max_turns}

    # -- step -----------------------------------------------------------------------------------------
    def plan(self, action: Any) -> ParsedAction:
        """Parse ``action`` and apply the budget: the first half of ``step`` (used by vector envs)."""
        if self._ex is None:
            raise ResetNeeded("Cannot call step() before reset(): call env.reset() first.")
        if self._done:
            raise ResetNeeded("This episode has ended (the agent answered or the budget ran out); "
                              "call env.reset() before step().")
        p = parse_action(action)
        if p.kind == SEARCH and self._num_searches >= self.max_turns:
            p.kind, p.error = INVALID, f"the search budget ({self.max_turns} searches) is used up; answer now"
        return p

    def search(self, queries: Sequence[str]) -> list[list[Any]] | str:
        """Run the queries of one step; a QueryError from the retriever comes back as its message."""
        try:
            return self.retriever.batch_search(list(queries), self.top_k)
        except QueryError as exc:
            return str(exc)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        p = self.plan(action)
        hits = self.search(p.queries) if p.kind == SEARCH else None
        return self.finish(p, hits)

    def finish(self, p: ParsedAction, hits: list[list[Any]] | str | None) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply a planned action and its retrieval results: the second half of ``step``."""
        self._t += 1
        if isinstance(hits, str):  # the retriever refused the query
            p.kind, p.error = INVALID, hits
        reward = 0.0
        terminated = False
        doc_ids: list[str] = []
        titles: list[str] = []
        gold_hit: bool | None = None
        kind = p.kind
        if kind == SEARCH:
            self._num_searches += 1
            obs = self.formatter.observation(hits)  # type: ignore[arg-type]
            for hl in hits:  # type: ignore[union-attr]
                for h in hl:
                    doc_ids.append(h.id)
                    titles.append(h.passage.title)
            self._retrieved.update(doc_ids)
            if self._gold:
                gold_hit = not self._gold.isdisjoint(doc_ids)
            if self.observation_format == "chat":
                obs = obs.strip()
            if self.budget_notice and self._num_searches >= self.max_turns:
                obs += self._budget_notice
        elif kind == ANSWER:
            terminated = True
            obs = ""
        else:
            self._num_invalid += 1
            reward = -self.invalid_penalty if self.invalid_penalty else 0.0
            budget = p.error is not None and p.error.startswith("the search budget")
            obs = self._budget_obs if budget else self._invalid_obs
        truncated = not terminated and self._t >= self.max_steps
        if len(obs) > MAX_OBSERVATION_CHARS:
            obs = obs[:MAX_OBSERVATION_CHARS]
        queries = list(p.queries)
        info: dict[str, Any] = {
            "kind": kind, "query": queries[0] if queries else None, "queries": queries, "doc_ids": doc_ids,
            "titles": titles, "gold_hit": gold_hit, "num_searches": self._num_searches,
            "num_invalid": self._num_invalid, "step": self._t, "family": self._family, "error": p.error,
        }
        # The record keeps its own lists: callers may mutate the info they get.
        recorded_action = clip_action(p.raw, self.record_action_chars)
        step_rec = Step(action=recorded_action, kind=kind, query=info["query"], doc_ids=doc_ids[:],
                        gold_hit=gold_hit, reward=reward, queries=queries[:], titles=titles[:])
        if p.error:
            step_rec.extra["error"] = p.error
        self._steps.append(step_rec)
        if terminated or truncated:
            outcome = self._end(p.answer if terminated else None, terminated, info)
            reward += outcome
            step_rec.reward = reward
        self._return += reward
        if terminated or truncated:
            info["return"] = self._return
            self._last_traj = self._build_trajectory()
        if self.observation_format == "chat":
            info["messages"] = [{"role": self._tool_role if kind == SEARCH else "user", "content": obs}] if obs \
                else []
        if self.render_mode is not None:
            self._transcript.extend([recorded_action, obs])
        return obs, reward, terminated, truncated, info

    def _gold_norms(self) -> list[str]:
        key = id(self._ex)
        hit = self._norm_cache.get(key)
        if hit is None or hit[0] is not self._ex:
            if len(self._norm_cache) > 100_000:
                self._norm_cache.clear()
            hit = self._norm_cache[key] = (self._ex, [normalize_answer(a) for a in self._answers])
        return hit[1]

    def _end(self, prediction: str | None, answered: bool, info: dict[str, Any]) -> float:
        self._done = True
        ctx = RewardContext(prediction=prediction, answers=self._answers, num_searches=self._num_searches,
                            num_invalid=self._num_invalid, num_steps=self._t, answered=answered,
                            supporting_ids=list(self._gold), retrieved_ids=self._retrieved,
                            max_turns=self.max_turns, metadata=self._ex.metadata or {},
                            normalized_answers=self._gold_norms())
        outcome = float(self.reward_fn(ctx))
        self._prediction = prediction
        self._em = ctx.exact_match()
        self._f1 = ctx.token_f1()
        self._outcome = outcome
        info.update(em=self._em, f1=self._f1, prediction=prediction, answers=list(self._answers),
                    outcome_reward=outcome, question_id=str(self._ex.id), answered=answered)
        return outcome

    def _wrap_text(self, text: str) -> str:
        return text.strip() if self.observation_format == "chat" else text

    # -- trajectories -----------------------------------------------------------------------------------
    def _build_trajectory(self) -> Trajectory:
        ex = self._ex
        extra: dict[str, Any] = {"hops": self._hops, "num_invalid": self._num_invalid,
                                 "outcome_reward": self._outcome, "episode_index": self._episode_index,
                                 "truncated": self._prediction is None}
        return Trajectory(
            episode_id=self._episode_id, question_id=str(ex.id), question=ex.question,
            answers=list(self._answers), family=self._family,
            split=(ex.metadata or {}).get("split", self.split), seed=self._seed, steps=list(self._steps),
            prediction=self._prediction, reward=float(self._return), em=int(self._em), f1=float(self._f1),
            num_searches=self._num_searches, extra=extra)

    def trajectory(self, agent: str | None = None, policy_step: int | None = None) -> Trajectory:
        """The Trajectory of the last finished episode (or of the current one, so far)."""
        if self._done and self._last_traj is not None:
            t = self._last_traj
        elif self._ex is not None:
            ex = self._ex
            t = Trajectory(episode_id=self._episode_id, question_id=str(ex.id), question=ex.question,
                           answers=list(self._answers), family=self._family,
                           split=(ex.metadata or {}).get("split", self.split), seed=self._seed,
                           steps=list(self._steps), reward=float(self._return), num_searches=self._num_searches,
                           extra={"hops": self._hops, "num_invalid": self._num_invalid, "finished": False})
        else:
            raise ResetNeeded("no episode yet: call env.reset() first")
        if agent is not None or policy_step is not None:
            from dataclasses import replace

            t = replace(t, agent=agent if agent is not None else t.agent,
                        policy_step=policy_step if policy_step is not None else t.policy_step)
        return t

    @property
    def done(self) -> bool:
        return self._done

    @property
    def example(self) -> Any:
        """The current question (a QAExample)."""
        return self._ex

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return "".join(self._transcript)
        return None

    def close(self) -> None:
        # The retriever is shared with other environments built from the same inputs; leave it open.
        self._transcript = []
