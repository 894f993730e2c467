"""SkyRL: ``SearchgymTextEnv``, a ``skyrl_gym`` ``BaseTextEnv`` over ``SearchEnv``, with diversity metrics.

Register it (``register()``, done on import) and name it in the SkyRL config::

    environment.env_class=searchgym
    environment.skyrl_gym.searchgym.corpus=null        # null: the embedded world; or a corpus / index dir
    environment.skyrl_gym.searchgym.retriever=null     # or http://127.0.0.1:8000/retrieve (searchgym serve)
    environment.skyrl_gym.searchgym.split=train
    generator.max_turns=5

Data rows (``searchgym data export-world``) carry ``id`` / ``extra_info.index`` (which question) and
``reward_spec``; the env poses that question, parses ``<search>`` / ``<answer>`` / ``<tool_call>`` actions
and scores as ``SearchEnv`` does. ``get_metrics`` returns the episode (EM, F1, searches and its trajectory);
``aggregate_metrics`` turns a batch of them into query-diversity figures (``diversity/*``) plus means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from searchgym.errors import ConfigError
from searchgym.integrations._common import diversity_figures, new_tracker, question_options, require

require("skyrl")

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

ENV_ID = "searchgym"
_ENV_KEYS = ("corpus", "dataset", "retriever", "split", "top_k", "max_turns", "max_steps", "reward",
             "invalid_penalty", "prompt_template", "observation_format", "passage_chars", "world_seed",
             "retriever_kwargs")


_INT_KEYS = ("top_k", "max_turns", "max_steps", "passage_chars", "world_seed")


def _as_int(key: str, value: Any) -> int:
    """A config integer (YAML and Hydra overrides may hand it over as a string); ConfigError otherwise."""
    if isinstance(value, bool):
        raise ConfigError(f"SkyRL env config {key!r} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) <= 20:
        return int(value)
    shown = repr(value) if isinstance(value, (str, float)) and len(repr(value)) <= 40 else type(value).__name__
    raise ConfigError(f"SkyRL env config {key!r} must be an integer, got {shown}")


def _config_dict(cfg: Any) -> dict[str, Any]:
    if cfg is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            cfg = OmegaConf.to_container(cfg, resolve=True)
    except ImportError:
        pass
    if not isinstance(cfg, Mapping):
        cfg = vars(cfg)
    return {k: v for k, v in cfg.items() if k in _ENV_KEYS}


class SearchgymTextEnv(BaseTextEnv):
    """One searchgym episode per SkyRL trajectory (``env_config`` keys are ``SearchEnv`` arguments).

    ``aggregate_metrics`` adds the default dozen ``diversity/*`` figures (``docs/metrics.md``); set the class
    attribute ``diversity_metrics = "all"`` (or a list of keys and prefixes) for more."""

    diversity_metrics: str | tuple[str, ...] = "default"

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        from searchgym.envs import SearchEnv

        kw = _config_dict(env_config)
        self.extras = dict(extras or {})
        if "max_turns" in self.extras and "max_turns" not in kw:
            kw["max_turns"] = self.extras["max_turns"]
        for key in _INT_KEYS:
            if key in kw and kw[key] is not None:
                kw[key] = _as_int(key, kw[key])
        self.env = SearchEnv(**kw)
        self.max_turns = self.env.max_steps

    def init(self, prompt: Any) -> tuple[Any, dict[str, Any]]:
        """Pose the row's question; keep the row's prompt if it has one, else the env's."""
        options = question_options(self.env, self.extras, {})
        if options is None and prompt:
            raise ConfigError("the row has a prompt but its extras name no question (id / extra_info.index, or "
                              "question + reward_spec.ground_truth); export rows with `searchgym data export-world`")
        obs, info = self.env.reset(options=options)
        if not prompt:
            prompt = [{"role": "user", "content": obs}]
        return prompt, {"question_id": info["question_id"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        if self.env.done:
            return BaseTextEnvStepOutput(observations=[], reward=0.0, done=True, metadata={"kind": "ended"})
        obs, reward, terminated, truncated, info = self.env.step(action if isinstance(action, str) else "")
        done = bool(terminated or truncated)
        meta = {k: info.get(k) for k in ("kind", "queries", "error", "num_searches")}
        if done:
            meta.update(em=info.get("em"), f1=info.get("f1"))
        return BaseTextEnvStepOutput(observations=[{"role": "user", "content": obs}] if obs and not done else [],
                                     reward=float(reward), done=done, metadata=meta)

    def get_metrics(self) -> dict[str, Any]:
        if self.env.example is None:
            return {}
        t = self.env.trajectory()
        return {"em": float(t.em), "f1": float(t.f1), "num_searches": float(t.num_searches),
                "num_invalid": float(t.extra.get("num_invalid", 0)), "trajectory": t.to_dict()}

    @staticmethod
    def aggregate_metrics(metrics: list[dict[str, Any]]) -> dict[str, Any]:
        """Means of the numeric figures, plus the query diversity of the batch's episodes."""
        from skyrl_gym.metrics import default_aggregate_metrics

        from searchgym.integrations._common import world_titles

        out: dict[str, Any] = default_aggregate_metrics(metrics)
        trajs = [m["trajectory"] for m in metrics if isinstance(m.get("trajectory"), Mapping)]
        out.update(diversity_figures(new_tracker(world_titles(None)), 0, trajs, SearchgymTextEnv.diversity_metrics))
        return out


def register(env_id: str = ENV_ID) -> str:
    """Register :class:`SearchgymTextEnv` with ``skyrl_gym`` as ``env_id`` (idempotent); return the id."""
    import skyrl_gym
    from skyrl_gym.envs.registration import registry

    if env_id not in registry:
        skyrl_gym.register(id=env_id, entry_point="searchgym.integrations.skyrl:SearchgymTextEnv")
    return env_id


register()

__all__ = ["ENV_ID", "SearchgymTextEnv", "register"]
