"""The strategy policy on a mixed train split, where the reward-optimal policy is a MIX (issue 21 §2, §4, §6).

On the world's train split one strategy (``decompose``) is best for every question, so "decompose everywhere"
is the optimum and converging there is no finding. Here the train split is mixed: next to the majority
families, a minority family (``minority_share`` of train, default 8%) of questions whose subject is a nickname
(the world's ``shift_strategy`` questions): only ``entity`` (an alias lookup first) solves them, and the
nickname's words are a cue the policy can learn. The reward-optimal policy routes the minority to ``entity``
and the rest to ``decompose``/``hops``: does RL keep that question-dependent mix, or squeeze the minority's
strategy away? The nickname questions are split by nickname: the policy trains on some nicknames and is
evaluated on questions about nicknames it never saw (``minority_heldout``).

Arms: those of :mod:`strategy_policy` plus a rejection-sampling SFT arm (``rs_sft``: the data RL rewards,
without RL), a positive control (``grpo_majority``: a reward that pays only the majority strategy, so collapse
is known to happen and the instrument must see it) and Critique-GRPO (``grpo_critique``: a failed choice gets
the env's critique as an input, "the subject is a nickname that was never resolved" for a nickname question,
"the answer was wrong" otherwise, and one refinement choice; both enter the group). Every arm runs at the same
learning rate, and its exact KL to its SFT start is reported beside it.

Per arm, every figure is a mean over seeds with a 95% t-interval ``ci: [lo, hi]`` (the LM arms' form):
``softmax_entropy`` (mean per-question entropy of the policy's softmax), ``pooled_entropy`` (plug-in entropy of
``pooled_n`` sampled choices pooled over questions: rarefied to one n for every arm), both per family,
``mi_family_strategy`` (exact mutual information between the question's family and the chosen strategy),
``mi_minority_strategy`` (the same between "a minority question or not" and the strategy: the part of the MI
that can come from routing the minority, as the majority families can also split among themselves), success
per split and on the minority family, entropy on the questions the start solves vs fails, and
``routing_share``: the share of seeds whose policy routes the held-out minority (success >= 0.5 there), with a
Wilson ``ci`` (a mean over a bimodal outcome hides the result).
"""

from __future__ import annotations

import functools
import random
import time
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.parallel import ordered_map
from searchgym.experiments.squeeze.strategy_policy import (
    ALL_ARMS,
    Featurizer,
    Outcomes,
    StrategyConfig,
    _Ctx,
    outcomes_for,
    sft_start,
    train_arm,
)

MINORITY = "nickname"
MINORITY_SOURCE = "shift_strategy"
CRITIQUES = ("the subject is a nickname that was never resolved", "the answer was wrong")
DEFAULT_ARMS = ("sft", "rs_sft", "grpo", "grpo_kl", "grpo_ent", "grpo_klcov", "grpo_count", "grpo_darling",
                "grpo_critique", "grpo_majority")


@dataclass
class ContextualConfig:
    minority_share: float = 0.08        # share of the mixed train split that is the minority family
    seeds: int = 20
    steps: int = 60
    arms: tuple[str, ...] = DEFAULT_ARMS
    pooled_n: int = 256                 # sampled choices behind the plug-in (pooled) entropy, for every arm
    route_threshold: float = 0.5        # a seed routes the minority when its held-out minority success >= this
    base: dict[str, Any] = field(default_factory=dict)  # StrategyConfig overrides (world, lr, group size, ...)

    def strategy_config(self) -> StrategyConfig:
        # the strategy stage's splits, so a squeeze run computes the outcomes once (outcomes_for caches them)
        kw = {"seeds": self.seeds, "steps": self.steps, "arms": tuple(self.arms), **self.base}
        return StrategyConfig(**kw)

    def check(self) -> None:
        if not 0.0 < self.minority_share < 0.5:
            raise ConfigError(f"minority_share must be in (0, 0.5), got {self.minority_share}")
        bad = [a for a in self.arms if a not in ALL_ARMS]
        if bad or not self.arms:
            raise ConfigError(f"unknown or no arm(s) {bad}; choose from {list(ALL_ARMS)}")
        if self.pooled_n < 2:
            raise ConfigError(f"pooled_n must be >= 2, got {self.pooled_n}")
        self.strategy_config().check()


def mixed_outcomes(out: Outcomes, minority_share: float, seed: int = 0) -> tuple[Outcomes, dict[str, Any]]:
    """The mixed train split: train + the nickname questions of some nicknames (``minority_share`` of the
    result); the others' questions become ``minority_heldout``. Split by nickname (the question's subject
    phrase), so held-out questions are about nicknames the policy never trained on."""
    if MINORITY_SOURCE not in out.em:
        raise ConfigError(f"the outcomes lack the {MINORITY_SOURCE!r} split the minority family comes from")
    qs = out.questions[MINORITY_SOURCE]
    by_alias: dict[str, list[int]] = {}
    for i, q in enumerate(qs):
        by_alias.setdefault(_nickname(q), []).append(i)
    names = sorted(by_alias)
    random.Random(f"contextual/{seed}").shuffle(names)
    n_major = len(out.questions["train"])
    want = round(minority_share * n_major / (1 - minority_share))
    take: list[int] = []
    for a in names:
        if len(take) >= want:
            break
        take += by_alias[a]
    rest = sorted(set(range(len(qs))) - set(take))
    if len(take) < want or not rest:
        raise ConfigError(f"minority_share={minority_share} needs {want} nickname questions in train and some held "
                          f"out; the world has {len(qs)}")
    take.sort()
    em_m = out.em[MINORITY_SOURCE]
    fam_train = list(out.families.get("train") or ["?"] * n_major)
    mixed = Outcomes(
        out.strategies,
        {"train": out.questions["train"] + [qs[i] for i in take], "test": out.questions["test"],
         "minority_heldout": [qs[i] for i in rest]},
        {"train": np.vstack([out.em["train"], em_m[take]]), "test": out.em["test"], "minority_heldout": em_m[rest]},
        out.seconds,
        {"train": fam_train + [MINORITY] * len(take), "test": list(out.families.get("test") or []),
         "minority_heldout": [MINORITY] * len(rest)},
        {"train": [0 if i >= n_major else 1 for i in range(n_major + len(take))]},
    )
    info = {"train_questions": n_major + len(take), "minority_train": len(take), "minority_heldout": len(rest),
            "minority_share": len(take) / (n_major + len(take)), "nicknames_train": len({_nickname(qs[i]) for i in take}),
            "nicknames_heldout": len({_nickname(qs[i]) for i in rest})}
    return mixed, info


def _nickname(question: str) -> str:
    """The nickname phrase of a ``shift_strategy`` question ("the Silent Compass"): its capitalised word pair."""
    words = question.rstrip("?.").split()
    for j in range(len(words) - 2):
        if words[j].lower() == "the" and words[j + 1][:1].isupper() and words[j + 2][:1].isupper():
            return " ".join(words[j + 1:j + 3])
    return question


# ------------------------------------------------------------------------------------------------ measures
def _probs(policy: Any, x: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        return torch.softmax(policy(x), -1).double().numpy()


def _h(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _row_h(p: np.ndarray) -> np.ndarray:
    return -(np.where(p > 0, p * np.log(np.clip(p, 1e-300, None)), 0.0)).sum(1)


def pooled_entropy(p: np.ndarray, n: int, rng: np.random.Generator) -> float:
    """Plug-in entropy of ``n`` choices: a question drawn uniformly, then a strategy from the policy."""
    q = rng.integers(0, len(p), size=n)
    u = rng.random(n)
    a = (p[q].cumsum(1) < u[:, None]).sum(1).clip(0, p.shape[1] - 1)
    return _h(np.bincount(a, minlength=p.shape[1]) / n)


def measure(p: np.ndarray, em: np.ndarray, families: list[str], *, pooled_n: int, seed: int,
            start_solved: np.ndarray | None = None, start_p: np.ndarray | None = None) -> dict[str, Any]:
    """Every per-policy figure on one split: ``p`` [questions, strategies] the policy, ``em`` the outcomes."""
    fam = np.asarray(families)
    rng = np.random.default_rng([seed, 11])
    succ = (p * em).sum(1)
    marg = p.mean(0)
    out: dict[str, Any] = {"success": float(succ.mean()), "softmax_entropy": float(_row_h(p).mean()),
                           "pooled_entropy": pooled_entropy(p, pooled_n, rng), "marginal_entropy": _h(marg),
                           "shares": marg.tolist()}
    fams = sorted(set(families))
    per: dict[str, Any] = {}
    mi = _h(marg)
    for f in fams:
        m = fam == f
        pf = p[m]
        mi -= m.mean() * _h(pf.mean(0))
        per[f] = {"softmax_entropy": float(_row_h(pf).mean()), "pooled_entropy": pooled_entropy(pf, pooled_n, rng),
                  "success": float(succ[m].mean()), "shares": pf.mean(0).tolist()}
    out["per_family"] = per
    out["mi_family_strategy"] = max(0.0, float(mi))
    if MINORITY in per and len(fams) > 2:
        # the part of it that is the minority against the rest (the majority families may split among themselves)
        m = fam == MINORITY
        mi_m = _h(marg) - m.mean() * _h(p[m].mean(0)) - (~m).mean() * _h(p[~m].mean(0))
        out["mi_minority_strategy"] = max(0.0, float(mi_m))
    elif MINORITY in per:
        out["mi_minority_strategy"] = out["mi_family_strategy"]
    if start_solved is not None:
        for name, m in (("start_solved", start_solved), ("start_failed", ~start_solved)):
            out[f"softmax_entropy_{name}"] = float(_row_h(p[m]).mean()) if m.any() else None
    if start_p is not None:
        kl = (p * (np.log(np.clip(p, 1e-300, None)) - np.log(np.clip(start_p, 1e-300, None)))).sum(1)
        out["kl_to_start"] = float(kl.mean())
    return out


# ------------------------------------------------------------------------------------------------ the run
@dataclass
class _Contextual:
    """What one seed's runs need (pickled to a worker process)."""
    cfg: ContextualConfig
    ctx: _Ctx
    mixed: Outcomes
    xs: dict[str, Any]
    splits: tuple[str, ...]

    def evaluate(self, policy: Any, seed: int, start_p: dict[str, np.ndarray] | None) -> dict[str, Any]:
        ev: dict[str, Any] = {}
        for s in self.splits:
            p = _probs(policy, self.xs[s])
            solved = None
            if s == "train" and start_p is not None:
                solved = (start_p["train"] * self.mixed.em["train"]).sum(1) >= 0.5
            fams = self.mixed.families[s] or ["all"] * len(p)
            ev[s] = measure(p, self.mixed.em[s], fams, pooled_n=self.cfg.pooled_n, seed=seed, start_solved=solved,
                            start_p=None if start_p is None else start_p[s])
            ev[s]["_p"] = p
        ev["routes"] = ev["minority_heldout"]["success"] >= self.cfg.route_threshold
        return ev


def _contextual_seed(job: _Contextual, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One seed: its SFT start's evaluation and every arm's, each arm trained from that start."""
    start, _ = sft_start(job.ctx, seed)
    start_ev = job.evaluate(start, seed, None)
    start_p = {s: start_ev[s]["_p"] for s in job.splits}
    evs = []
    for arm in job.cfg.arms:
        pol, _, _ = train_arm(job.ctx, arm, seed, start)
        evs.append(job.evaluate(pol, seed, start_p))
    return start_ev, evs


def _contextual_job(cfg: ContextualConfig, scfg: StrategyConfig, mixed: Outcomes) -> _Contextual:
    """The mixed split's features (question words | bias | one column per critique kind, 0 but in refinements)
    and the context the arms train in."""
    import torch

    from searchgym.agents.heuristics import DEFAULT_WEIGHTS

    weights = dict(DEFAULT_WEIGHTS if scfg.demo_weights is None else scfg.demo_weights)
    feat = Featurizer(mixed.questions["train"], scfg.min_df)
    splits = ("train", "test", "minority_heldout")
    xs = {s: torch.cat([feat(mixed.questions[s]), torch.zeros(len(mixed.questions[s]), len(CRITIQUES))], 1)
          for s in splits}
    crit = np.asarray(mixed.critique["train"]) + feat.dim
    scfg_ctx = StrategyConfig(**{**asdict(scfg), "splits": splits})
    major = np.array([f != MINORITY for f in mixed.families["train"]])
    em_major = mixed.em["train"][major].mean(0)
    w = np.array([weights.get(s, 0.0) for s in mixed.strategies])
    majority = int(np.lexsort((-w, -em_major))[0])  # best on the majority; a tie goes to the demonstrator's
    ctx = _Ctx(scfg_ctx, mixed.strategies, xs, {s: mixed.em[s] for s in splits}, weights, majority=majority,
               critique=crit)
    return _Contextual(cfg, ctx, mixed, xs, splits)


def run_contextual(cfg: ContextualConfig | None = None, outcomes: Outcomes | None = None,
                   jobs: int | Executor = 1, per_seed: bool = False) -> dict[str, Any]:
    """SFT start + every arm x seed on the mixed train split; the summary's ``organism.contextual`` block.
    ``jobs`` > 1 (or a process pool) runs the seeds (and the outcome table's splits) in worker processes: the
    same result. ``per_seed``: also each arm's per-seed figures (:func:`seed_figures`; the budget sweep's MI
    split and paired contrasts need them)."""
    import torch

    cfg = cfg or ContextualConfig()
    cfg.check()
    scfg = cfg.strategy_config()
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(scfg.threads)
    try:
        base = outcomes if outcomes is not None else outcomes_for(scfg, jobs)
        mixed, info = mixed_outcomes(base, cfg.minority_share, scfg.world_seed)
        job = _contextual_job(cfg, scfg, mixed)
        entity = mixed.strategies.index("entity") if "entity" in mixed.strategies else None
        seeds = list(range(scfg.first_seed, scfg.first_seed + scfg.seeds))
        per_seed_evs = ordered_map(functools.partial(_contextual_seed, job), seeds, jobs, scfg.threads)
        arms = {arm: _arm_block([evs[i] for _, evs in per_seed_evs], mixed.strategies, entity)
                for i, arm in enumerate(cfg.arms)}
        start_block = _arm_block([ev for ev, _ in per_seed_evs], mixed.strategies, entity)
        splits = job.splits
        res = {"config": {**asdict(cfg), "arms": list(cfg.arms)}, "split": info, "strategies": list(mixed.strategies),
               "majority_strategy": mixed.strategies[job.ctx.majority], "minority_strategy": "entity",
               "per_strategy": {s: {sp: float(mixed.em[sp][:, j].mean()) for sp in splits}
                                for j, s in enumerate(mixed.strategies)},
               "oracle": {sp: float(mixed.em[sp].max(1).mean()) for sp in splits},
               "critiques": list(CRITIQUES), "seeds": len(seeds), "steps": scfg.steps, "lr": scfg.lr,
               "start": start_block, "arms": arms}
        res["findings"] = contextual_findings(res)
        if per_seed:
            res["per_seed"] = {arm: [seed_figures(evs[i]) for _, evs in per_seed_evs]
                               for i, arm in enumerate(cfg.arms)}
        res["seconds"] = time.perf_counter() - t0
        return res
    finally:
        torch.set_num_threads(threads)


def seed_figures(ev: dict[str, Any]) -> dict[str, Any]:
    """One seed's headline figures from its evaluation: whether it routes, softmax entropy (all train questions
    and the minority's) and MI on train, success on the held-out minority and on test."""
    tr = ev["train"]
    return {"routes": bool(ev["routes"]), "softmax_entropy": tr["softmax_entropy"],
            "mi_family_strategy": tr["mi_family_strategy"], "mi_minority_strategy": tr.get("mi_minority_strategy"),
            "train_success": tr["success"],
            "minority_softmax_entropy": tr["per_family"].get(MINORITY, {}).get("softmax_entropy"),
            "minority_heldout_success": ev["minority_heldout"]["success"], "test_success": ev["test"]["success"]}


def _arm_block(evs: list[dict[str, Any]], strategies: tuple[str, ...], entity: int | None) -> dict[str, Any]:
    from searchgym.experiments.squeeze.stats import wilson
    from searchgym.experiments.squeeze.summary import _ms

    def ms(vals: list[Any]) -> dict[str, Any]:
        d = _ms([v for v in vals if v is not None])
        d.pop("values", None)
        return d

    tr = [e["train"] for e in evs]
    fams = sorted(tr[0]["per_family"])
    k = sum(bool(e["routes"]) for e in evs)
    lo, hi = wilson(k, len(evs))
    block: dict[str, Any] = {
        "seeds": len(evs),
        "softmax_entropy": ms([t["softmax_entropy"] for t in tr]),
        "pooled_entropy": ms([t["pooled_entropy"] for t in tr]),
        "marginal_entropy": ms([t["marginal_entropy"] for t in tr]),
        "mi_family_strategy": ms([t["mi_family_strategy"] for t in tr]),
        "mi_minority_strategy": ms([t.get("mi_minority_strategy") for t in tr]),
        "per_family": {f: {key: ms([t["per_family"][f][key] for t in tr])
                           for key in ("softmax_entropy", "pooled_entropy", "success")} for f in fams},
        "train_success": ms([t["success"] for t in tr]),
        "test_success": ms([e["test"]["success"] for e in evs]),
        "minority_train_success": ms([t["per_family"].get(MINORITY, {}).get("success") for t in tr]),
        "minority_heldout_success": ms([e["minority_heldout"]["success"] for e in evs]),
        "softmax_entropy_start_solved": ms([t.get("softmax_entropy_start_solved") for t in tr]),
        "softmax_entropy_start_failed": ms([t.get("softmax_entropy_start_failed") for t in tr]),
        "kl_to_start": ms([t.get("kl_to_start") for t in tr]),
        "routing_share": {"k": k, "n": len(evs), "mean": k / len(evs), "ci": [lo, hi]},
        "shares": dict(zip(strategies, np.mean([t["shares"] for t in tr], 0).round(4).tolist())),
    }
    if entity is not None:
        block["minority_entity_share"] = ms([e["minority_heldout"]["shares"][entity] for e in evs])
    return block


# ------------------------------------------------------------------------------------------------ text
def _apart(a: dict[str, Any], b: dict[str, Any]) -> str:
    """'below' / 'above' when the two 95% CIs do not overlap, else 'overlapping'."""
    if not a.get("ci") or not b.get("ci"):
        return "overlapping"
    if a["ci"][1] < b["ci"][0]:
        return "below"
    if a["ci"][0] > b["ci"][1]:
        return "above"
    return "overlapping"


def contextual_findings(res: dict[str, Any]) -> dict[str, Any]:
    """Computed verdicts: which arms' strategy entropy falls below the start's (95% CIs apart), whether the
    positive control fired, and which arms route the held-out minority in most seeds."""
    st = res["start"]
    ent = {a: _apart(b["softmax_entropy"], st["softmax_entropy"]) for a, b in res["arms"].items()}
    minority = {a: _apart(b["minority_heldout_success"], st["minority_heldout_success"])
                for a, b in res["arms"].items()}
    out: dict[str, Any] = {"entropy_vs_start": ent, "minority_success_vs_start": minority}
    if "grpo_majority" in res["arms"]:
        out["positive_control_fired"] = ent["grpo_majority"] == "below"
    return out


def _c(d: dict[str, Any] | None, nd: int = 3) -> str:
    if not d or d.get("mean") is None:
        return "–"
    if d.get("ci"):
        return f"{d['mean']:.{nd}f} [{d['ci'][0]:.{nd}f}, {d['ci'][1]:.{nd}f}]"
    return f"{d['mean']:.{nd}f}"


def contextual_table(res: dict[str, Any]) -> list[str]:
    """Markdown: per arm, mean [95% CI] over seeds; routing share with its Wilson interval."""
    head = ["arm", "softmax entropy", "pooled entropy", f"{MINORITY} entropy", "MI(family; strategy)",
            "train success", f"{MINORITY} held-out success", "routes (seeds)", "KL to start"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, b in [("SFT start", res["start"]), *res["arms"].items()]:
        r = b["routing_share"]
        lines.append(f"| {name} | {_c(b['softmax_entropy'])} | {_c(b['pooled_entropy'])} | "
                     f"{_c(b['per_family'].get(MINORITY, {}).get('softmax_entropy'))} | "
                     f"{_c(b['mi_family_strategy'])} | {_c(b['train_success'])} | "
                     f"{_c(b['minority_heldout_success'])} | {r['k']}/{r['n']} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] | "
                     f"{_c(b.get('kl_to_start'))} |")
    return lines


def contextual_sentences(res: dict[str, Any]) -> list[str]:
    """What happened, one sentence per point, generated from the numbers."""
    f = res["findings"]
    st = res["start"]
    below = [a for a, v in f["entropy_vs_start"].items() if v == "below"]
    above = [a for a, v in f["entropy_vs_start"].items() if v == "above"]
    sp = res["split"]
    lines = [(f"- Mixed train split: {sp['minority_train']} {MINORITY} questions ({sp['minority_share']:.1%} of "
              f"{sp['train_questions']}); held out: {sp['minority_heldout']} questions about "
              f"{sp['nicknames_heldout']} unseen nicknames. {res['seeds']} seeds x {res['steps']} steps per arm, "
              f"lr {res['lr']} for every arm.")]
    lines.append(f"- Strategy entropy (mean per-question softmax) falls below the SFT start's "
                 f"({_c(st['softmax_entropy'])}; 95% CIs apart) in {', '.join(below) or 'no arm'}; rises above it in "
                 f"{', '.join(above) or 'no arm'}.")
    if "positive_control_fired" in f:
        lines.append(f"- Positive control (reward pays only `{res['majority_strategy']}`): "
                     + ("the instrument fires (entropy "
                        f"{_c(res['arms']['grpo_majority']['softmax_entropy'])} vs the start's)."
                        if f["positive_control_fired"] else
                        "the instrument does NOT fire: its entropy CI is not below the start's, so a null elsewhere "
                        "says nothing."))
    routes = {a: b["routing_share"] for a, b in res["arms"].items()}
    lines.append("- Seeds that route the held-out minority to a solving strategy (success >= "
                 f"{res['config']['route_threshold']}): start {st['routing_share']['k']}/{st['routing_share']['n']}; "
                 + ", ".join(f"{a} {r['k']}/{r['n']}" for a, r in routes.items()) + ".")
    return lines


__all__ = ["CRITIQUES", "DEFAULT_ARMS", "MINORITY", "ContextualConfig", "contextual_findings",
           "contextual_sentences", "contextual_table", "measure", "mixed_outcomes", "pooled_entropy",
           "run_contextual", "seed_figures"]
