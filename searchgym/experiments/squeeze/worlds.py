"""The squeeze experiment's LM comparison pooled over world seeds.

A finding on one procedural world is a finding about that world. Each run of ``searchgym squeeze --world-seed N``
compares RL arms with continued SFT over seeds on one world; this module reads several such runs'
``summary.json`` and states, for every RL arm that ran on at least two worlds, three things per figure:

- ``per_world``: the arm − continued SFT difference on each world (Welch interval over that world's seeds);
- ``pooled``: the mean of the worlds' differences, with a Welch-Satterthwaite interval from every seed's variance
  (the average effect on *these* worlds; seed noise only);
- ``across``: the same mean with a t-interval over the worlds' differences (W − 1 degrees of freedom): what to
  expect on a *new* world drawn the same way. With three worlds it is wide by construction;
- ``heterogeneity``: Cochran's Q over the worlds (inverse-variance weights), its p-value and I², i.e. whether
  the worlds disagree by more than their seeds would.

A world whose SFT start failed the competence gate is left out, with a warning: its LM rows answer nothing.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.stats import (
    COMPARED,
    diff_ci,
    excludes_zero,
    holm_into,
    inside_margin,
    margin_for,
    seed_values,
)

# Settings that may differ between the runs of one multi-world comparison (where they write, how fast, which
# arms and extra stages ran); any other config difference is reported, as the worlds would not be comparable.
_MAY_DIFFER = {"out", "world_seed", "start_from", "arms", "resume", "jobs", "threads", "only_start", "ship_start",
               "strategy_seeds", "strategy_arms", "strategy_steps", "contextual_seeds", "contextual_steps",
               "contextual_arms", "passk_max", "passk_questions", "passk_splits", "passk_seeds", "preset_name",
               "gate_questions_from_manifest", "quick", "device", "stop_on_failed_gate"}


def load_worlds(runs: list[str | Path]) -> list[dict[str, Any]]:
    """Each run directory's (or file's) ``summary.json``, with its path under ``_path``; a missing file or two
    runs of the same world seed is a :class:`ConfigError`."""
    out: list[dict[str, Any]] = []
    for r in runs:
        p = Path(r)
        p = p if p.suffix == ".json" and not p.is_dir() else p / "summary.json"
        if not p.exists():
            stopped = _stopped_at_gate(p.parent)
            if stopped is None:
                raise ConfigError(f"no {p}: each --worlds entry is a `searchgym squeeze --out DIR` run directory")
            out.append(stopped)
            continue
        s = read_summary(p)
        s["_path"] = str(p)
        out.append(s)
    seeds = [_world_seed(s) for s in out]
    dup = sorted({w for w in seeds if seeds.count(w) > 1})
    if dup:
        raise ConfigError(f"world seed(s) {dup} appear in more than one run; pool distinct worlds")
    return out


MAX_SUMMARY_BYTES = 64 << 20  # a real summary.json is < 1 MB


def _finite(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text} is out of range")
    return v


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def read_json_capped(p: Path, what: str = "squeeze summary.json") -> Any:
    """A regular UTF-8 JSON file of at most MAX_SUMMARY_BYTES with finite numbers only; else ConfigError."""
    try:
        if not p.is_file():
            raise ConfigError(f"{p} is not a regular file; give a {what}")
        if p.stat().st_size > MAX_SUMMARY_BYTES:
            raise ConfigError(f"{p} has {p.stat().st_size:,} bytes, over the {MAX_SUMMARY_BYTES:,}-byte cap of a {what}")
        with open(p, "rb") as f:
            raw = f.read(MAX_SUMMARY_BYTES + 1)
        return json.loads(raw.decode("utf-8"), parse_float=_finite, parse_constant=_no_constant)
    except OSError as e:
        raise ConfigError(f"{p} cannot be read ({e.strerror or e}); give a {what}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p} is not UTF-8 text; give a {what}") from None
    except RecursionError:
        raise ConfigError(f"{p} is nested too deeply to be a {what}") from None
    except ValueError as e:  # JSONDecodeError and the number checks
        raise ConfigError(f"{p} is not a {what}: {str(e)[:200]}") from None


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_values(p: Path, where: str, block: Any) -> None:
    if block is None:
        return
    if not isinstance(block, dict):
        raise ConfigError(f"{p}: {where} must be an object, not {type(block).__name__}")
    vals = block.get("values")
    if vals is not None and (not isinstance(vals, list) or not all(v is None or _is_num(v) for v in vals)):
        raise ConfigError(f"{p}: {where}.values must be a list of finite numbers (seeds' values)")


def check_summary(p: Path, s: Any) -> None:
    """The schema :func:`worlds_block` reads: objects where it expects them, an int world seed, finite numbers."""
    if not isinstance(s, dict) or not isinstance(s.get("arms"), dict) or not isinstance(s.get("config"), dict):
        raise ConfigError(f"{p} is not a squeeze summary.json ('arms' and 'config' must be objects)")
    ws = s["config"].get("world_seed")
    if ws is not None and (type(ws) is not int or not 0 <= ws < 2**63):
        raise ConfigError(f"{p}: config.world_seed must be a non-negative integer, not {ws!r}")
    comp = s.get("competence")
    if comp is not None and (not isinstance(comp, dict) or not all(
            comp.get(k) is None or _is_num(comp[k]) for k in ("test_success", "lower_bound"))):
        raise ConfigError(f"{p}: 'competence' must be an object with numeric test_success / lower_bound")
    if not isinstance(s.get("dose") or {}, dict):
        raise ConfigError(f"{p}: 'dose' must be an object")
    for name, arm in s["arms"].items():
        if not isinstance(arm, dict):
            raise ConfigError(f"{p}: arm {name!r} must be an object, not {type(arm).__name__}")
        for key, _ in COMPARED:
            _check_values(p, f"arms.{name}.{key}", arm.get(key))
        shift = arm.get("shift")
        if shift is not None and not isinstance(shift, dict):
            raise ConfigError(f"{p}: arms.{name}.shift must be an object")
        for sp, block in (shift or {}).items():
            _check_values(p, f"arms.{name}.shift.{sp}", block)


def read_summary(p: Path) -> dict[str, Any]:
    """A run's summary.json, read capped and checked (:func:`check_summary`)."""
    s = read_json_capped(p)
    check_summary(p, s)
    return s


def _stopped_at_gate(run: Path) -> dict[str, Any] | None:
    """A run stopped by ``--stop-on-failed-gate`` (a failed gate, no summary): a record that
    :func:`worlds_block` leaves out with its reason; None for anything else."""
    gate, cfg = run / "start_eval" / "gate.json", run / "config.json"
    if not gate.exists() or not cfg.exists():
        return None
    try:
        g, c = read_json_capped(gate, "gate.json"), read_json_capped(cfg, "config.json")
    except ConfigError:
        return None
    if not isinstance(g, dict) or not isinstance(c, dict):
        return None
    from types import SimpleNamespace

    from searchgym.experiments.squeeze.summary import competence

    try:
        comp = competence(SimpleNamespace(competence_gate=c.get("competence_gate", 0.3)), {"gate": g})
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        raise ConfigError(f"{gate} is not a competence gate record (or {cfg} not a squeeze config)") from None
    if comp["passed"]:
        return None
    return {"config": c, "arms": {}, "_path": str(run), "competence": comp}


def _world_seed(summary: dict[str, Any]) -> int:
    return int((summary.get("config") or {}).get("world_seed") or 0)


def _values(arm: dict[str, Any] | None, key: str) -> list[float]:
    """An arm's per-seed values of ``key`` (:func:`~searchgym.experiments.squeeze.stats.seed_values`), the
    missing ones left out."""
    return [float(v) for v in seed_values(arm or {}, key) if v is not None]


def pool_diffs(pairs: list[tuple[list[float], list[float]]], *, margin: float | None = None,
               alpha: float = 0.05) -> dict[str, Any]:
    """Pool per-world differences ``mean(a_w) - mean(b_w)`` (one ``(a_w, b_w)`` pair of per-seed values per world).

    Returns ``per_world`` (:func:`diff_ci` of each pair), ``pooled`` (equal-weight mean of the worlds' differences,
    Welch-Satterthwaite interval over every seed, with its equivalence verdict against ``margin``), ``across``
    (t-interval over the worlds' differences, W − 1 df; None for fewer than 2 worlds), ``heterogeneity``
    (Cochran's Q, its p, I²) and sign counts (``same_sign``: worlds whose difference has the pooled sign;
    ``shown``: worlds whose own interval excludes 0 on that side)."""
    from scipy.stats import chi2, t

    per = [diff_ci(a, b, margin=margin) for a, b in pairs]
    ok = [(a, b, d) for (a, b), d in zip(pairs, per) if d["ci"] is not None]
    out: dict[str, Any] = {"per_world": per, "pooled": None, "across": None, "heterogeneity": None,
                           "worlds": len(ok), "same_sign": None, "shown": None}
    if not ok:
        return out
    w = len(ok)
    diffs = np.array([d["diff"] for _, _, d in ok])
    mean = float(diffs.mean())
    # variance of each group mean (arm, base of world 1, arm, base of world 2, ...)
    groups = [(float(np.var(x, ddof=1)) / len(x), len(x)) for a, b, _ in ok for x in (a, b)]
    var = sum(v for v, _ in groups) / w ** 2
    se = math.sqrt(var)
    pooled: dict[str, Any] = {"diff": mean, "ci": [mean, mean], "p": 1.0 if mean == 0 else 0.0, "se": se,
                              "n_seeds": [sum(len(a) for a, _, _ in ok), sum(len(b) for _, b, _ in ok)]}
    if se > 0:
        den = sum((v / w ** 2) ** 2 / (n - 1) for v, n in groups)
        df = var ** 2 / den
        h = float(t.ppf(1 - alpha / 2, df)) * se
        pooled.update(ci=[mean - h, mean + h], p=float(2 * t.sf(abs(mean) / se, df)), df=df)
    if not (math.isfinite(mean) and math.isfinite(se)):
        pooled.update(ci=[math.nan, math.nan], p=None)  # a NaN seed value: no interval, never a "difference"
    pooled["detectable"] = excludes_zero(pooled["ci"])
    if margin is not None:
        eq = inside_margin(pooled["ci"], margin)
        pooled.update(margin=margin, equivalent=eq,
                      verdict="difference" if pooled["detectable"] else ("equivalent" if eq else "inconclusive"))
    out["pooled"] = pooled
    sign = np.sign(mean)
    out["same_sign"] = int(sum(1 for x in diffs if np.sign(x) == sign and sign != 0))
    out["shown"] = int(sum(1 for _, _, d in ok if d["detectable"] and np.sign(d["diff"]) == sign and sign != 0))
    if w >= 2:
        sd = float(diffs.std(ddof=1))
        h = float(t.ppf(1 - alpha / 2, w - 1)) * sd / math.sqrt(w)
        out["across"] = {"diff": mean, "ci": [mean - h, mean + h], "df": w - 1, "sd_worlds": sd,
                         "detectable": not (mean - h <= 0 <= mean + h)}
        ses = np.sqrt([groups[2 * i][0] + groups[2 * i + 1][0] for i in range(w)])
        if np.all(ses > 0):
            wts = 1.0 / ses ** 2
            fe = float((wts * diffs).sum() / wts.sum())
            q = float((wts * (diffs - fe) ** 2).sum())
            out["heterogeneity"] = {"Q": q, "df": w - 1, "p": float(chi2.sf(q, w - 1)),
                                    "I2": max(0.0, (q - (w - 1)) / q) if q > 0 else 0.0}
    return out


def _config_differences(summaries: list[dict[str, Any]]) -> dict[str, list[Any]]:
    cfgs = [s.get("config") or {} for s in summaries]
    # settings every run records (a run from before a setting existed ran with its default)
    keys = sorted(set(cfgs[0]).intersection(*cfgs[1:]) - _MAY_DIFFER) if cfgs else []
    return {k: [c.get(k) for c in cfgs] for k in keys
            if any(json.dumps(c.get(k), sort_keys=True) != json.dumps(cfgs[0].get(k), sort_keys=True)
                   for c in cfgs)}


def worlds_block(summaries: list[dict[str, Any]], *, base: str = "sft",
                 more_starts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Every RL arm that ran on >= 2 gated worlds against ``base`` (continued SFT), pooled over worlds
    (:func:`pool_diffs` for each compared figure and each shift split; the pooled shift splits Holm-corrected).

    ``more_starts``: runs of the same worlds from other SFT starts (the controls runs): they join the headline's
    random effects (worlds and starts) and nothing else; one whose start is already pooled, or that failed the
    gate, is left out."""
    gated: list[dict[str, Any]] = []
    left_out: list[dict[str, Any]] = []
    for s in sorted(summaries, key=_world_seed):
        comp = s.get("competence") or {}
        if comp and not comp.get("passed"):
            left_out.append({"world_seed": _world_seed(s), "why": "its SFT start failed the competence gate",
                             "test_success": comp.get("test_success"), "lower_bound": comp.get("lower_bound")})
            warnings.warn(f"world {_world_seed(s)} ({s.get('_path')}) left out: its SFT start failed the competence "
                          "gate, so its LM rows are not findings", stacklevel=2)
        elif base not in (s.get("arms") or {}):
            left_out.append({"world_seed": _world_seed(s), "why": f"no '{base}' arm"})
            warnings.warn(f"world {_world_seed(s)} ({s.get('_path')}) left out: it has no '{base}' arm to compare "
                          "against", stacklevel=2)
        else:
            gated.append(s)
    differs = _config_differences(gated)
    if differs:
        warnings.warn("the pooled runs differ in settings other than the world: " + ", ".join(differs),
                      stacklevel=2)
    worlds = [_world_seed(s) for s in gated]
    block: dict[str, Any] = {
        "base": base, "worlds": worlds, "runs": [s.get("_path") for s in gated], "left_out": left_out,
        "config_differences": differs,
        "gate": {str(_world_seed(s)): {k: (s.get("competence") or {}).get(k)
                                       for k in ("test_success", "lower_bound", "passed")} for s in gated},
        "start": {str(_world_seed(s)): (s.get("config") or {}).get("start_from") for s in gated},
        "arms": {},
    }
    rl_arms = sorted({a for s in gated for a in s["arms"] if a != base})
    block["one_world_only"] = {}
    for arm in rl_arms:
        on = [s for s in gated if arm in s["arms"]]
        if len(on) < 2:
            block["one_world_only"][arm] = _world_seed(on[0])
            continue
        figs: dict[str, Any] = {}
        for key, label in COMPARED:
            figs[key] = {"label": label, **pool_diffs(
                [(_values(s["arms"][arm], key), _values(s["arms"][base], key)) for s in on], margin=margin_for(key))}
        splits = sorted(set.intersection(*(set(s["arms"][arm].get("shift") or {}) for s in on)))
        shift = {sp: pool_diffs([(_values(s["arms"][arm], f"shift:{sp}"), _values(s["arms"][base], f"shift:{sp}"))
                                 for s in on], margin=margin_for("success")) for sp in splits}
        holm_into([shift[sp]["pooled"] for sp in splits if shift[sp]["pooled"] is not None])
        figs.update({f"shift:{sp}": {"label": sp, **v} for sp, v in shift.items()})
        block["arms"][arm] = {
            "label": on[0]["arms"][arm].get("label", arm), "worlds": [_world_seed(s) for s in on], "figures": figs,
            "kl_to_start": {str(_world_seed(s)): ((s.get("dose") or {}).get(arm) or {}).get("kl_to_start_last")
                            for s in on}}
    from searchgym.experiments.squeeze.random_effects import headline_random_effects

    extra = _other_starts(gated, more_starts or [], base)
    block["more_starts"] = [{"world_seed": _world_seed(s), "run": s.get("_path")} for s in extra]
    block.update(headline_random_effects(gated + extra, list(block["arms"]), base))  # the headline's intervals
    if "grpo" in block["random_effects"]:
        from searchgym.experiments.squeeze.endpoints import shift_cost_block

        shuffled = [s for s in gated + list(more_starts or []) if "grpo_shuffled" in (s.get("arms") or {})]
        block["shift_cost"] = shift_cost_block(gated + extra, shuffled,
                                               block["random_effects"]["grpo"]["endpoints"], "grpo", base)
    return block


def _other_starts(gated: list[dict[str, Any]], runs: list[dict[str, Any]], base: str) -> list[dict[str, Any]]:
    """The runs of ``runs`` that add an SFT start: on a pooled world, gated, with ``base``, and a start (its gate
    figures) that no pooled run has."""
    from searchgym.experiments.squeeze.random_effects import start_fingerprint

    worlds = {_world_seed(s) for s in gated}
    seen = {start_fingerprint(s) for s in gated}
    out = []
    for s in runs:
        fp = start_fingerprint(s)
        if (_world_seed(s) in worlds and (s.get("competence") or {}).get("passed") and base in (s.get("arms") or {})
                and fp not in seen):
            seen.add(fp)
            out.append(s)
    return out


def _ci(d: dict[str, Any] | None) -> str:
    if not d or d.get("diff") is None:
        return "–"
    if not d.get("ci"):
        return f"{d['diff']:+.3f}"
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"


def _worst_pooled_shift(figs: dict[str, Any]) -> str | None:
    shifts = {k: v for k, v in figs.items() if k.startswith("shift:") and v.get("pooled")}
    if not shifts:
        return None
    return min(shifts, key=lambda k: shifts[k]["pooled"]["diff"])


def _worst_shift_text(figs: dict[str, Any], quote: str = "") -> str:
    """``; worst ... split NAME diff [lo, hi], Holm p P`` for the worst pooled shift split ('' when none)."""
    worst = _worst_pooled_shift(figs)
    w = figs[worst]["pooled"] if worst else None
    if not w or w.get("p_holm") is None:
        return ""
    name = worst[len("shift:"):]  # type: ignore[index]
    return f"{quote}{name}{quote} {_ci(w)}, Holm p {w['p_holm']:.3f}"


def worlds_table(block: dict[str, Any], arm: str = "grpo") -> list[str]:
    """One markdown table: each compared figure (and the worst pooled shift split) per world, pooled over seeds,
    across worlds and its heterogeneity."""
    a = block["arms"].get(arm)
    if not a:
        return []
    ws = a["worlds"]
    head = ["| " + f"{a['label']} − continued SFT" + " | " + " | ".join(f"world {w}" for w in ws)
            + " | pooled over seeds | across worlds (t, " + f"{len(ws) - 1} df) | heterogeneity |",
            "|---|" + "---|" * len(ws) + "---|---|---|"]
    rows = []
    keys = [k for k, _ in COMPARED]
    worst = _worst_pooled_shift(a["figures"])
    if worst:
        keys.append(worst)
    for key in keys:
        f = a["figures"][key]
        label = f["label"] if not key.startswith("shift:") else f"`{f['label']}` success (worst pooled split)"
        p = f["pooled"] or {}
        v = p.get("verdict") or ("difference" if p.get("detectable") else "")
        holm_note = f", Holm p {p['p_holm']:.3f}" if p.get("p_holm") is not None else ""
        het = f["heterogeneity"]
        hs = f"I² {het['I2']:.2f}, p {het['p']:.2f}" if het else "–"
        rows.append(f"| {label} | " + " | ".join(_ci(d) for d in f["per_world"]) + f" | {_ci(p)} ({v}{holm_note})"
                    f" | {_ci(f['across'])} | {hs} |")
    return head + rows


def worlds_sentence(block: dict[str, Any], arm: str = "grpo") -> str:
    """The pooled answer in one sentence: the strategy and template entropy and test success, pooled and per world."""
    a = block["arms"].get(arm)
    if not a:
        return ""
    figs = a["figures"]
    ws = ", ".join(str(w) for w in a["worlds"])

    def part(key: str, name: str) -> str:
        f = figs[key]
        p = f["pooled"] or {}
        return (f"{name} {_ci(p)} ({p.get('verdict', '')}; same sign on {f['same_sign']} of {f['worlds']} worlds, "
                f"shown on {f['shown']}; across worlds {_ci(f['across'])})")

    worst = _worst_shift_text(figs, quote="`")
    tail = f"; worst pooled shift split {worst}" if worst else ""
    return (f"Over worlds {ws} ({a['label']} − continued SFT, pooled over every seed): "
            + "; ".join(part(k, n) for k, n in (("strategy_entropy", "strategy entropy"),
                                                 ("slot_entropy", "template entropy"),
                                                 ("test_success", "test success"))) + tail + ".")


def worlds_short(block: dict[str, Any], arm: str = "grpo") -> str:
    """The README's line: the arm − continued SFT pooled over worlds (entropy, test success, worst shift split)."""
    a = block["arms"][arm]
    figs = a["figures"]
    n = figs["test_success"]["pooled"]["n_seeds"] if figs["test_success"]["pooled"] else ["?", "?"]

    def d(key: str) -> str:
        f = figs[key]
        p = f["pooled"] or {}
        return f"{_ci(p)} ({p.get('verdict', '')}, same sign on {f['same_sign']}/{f['worlds']} worlds)"

    worst = _worst_shift_text(figs)
    out = [lo["world_seed"] for lo in block["left_out"]]
    left = f" (left out: world{'s' if len(out) > 1 else ''} {', '.join(map(str, out))}, failed gate)" if out else ""
    return (f"LM on world seeds {', '.join(str(x) for x in a['worlds'])}{left}, {a['label']} − continued SFT pooled "
            f"over {n[0]} vs {n[1]} seeds: strategy entropy {d('strategy_entropy')}; template entropy "
            f"{d('slot_entropy')}; test success {d('test_success')}"
            + (f"; worst shift split {worst}" if worst else "") + ".")


def worlds_markdown(block: dict[str, Any]) -> str:
    """The multi-world section: a caption, one table per pooled arm, the one-sentence answer and any warnings."""
    caption = (f"**Across world seeds {', '.join(str(w) for w in block['worlds'])}** (each world its own SFT start; "
               "per-world cells: Welch 95% interval over that world's seeds; pooled: the mean of the worlds' "
               "differences with a Welch-Satterthwaite interval over all seeds; across worlds: a t-interval over "
               "the worlds' differences, what to expect on a new world; heterogeneity: Cochran's Q over worlds):")
    lines = [caption, ""]
    for arm in block["arms"]:
        lines += [*worlds_table(block, arm), ""]
    if "grpo" in block["arms"]:
        lines += [worlds_sentence(block, "grpo"), ""]
    for lo in block["left_out"]:
        figs = (f" (test success {lo['test_success']:.3f}, Wilson lower bound {lo['lower_bound']:.3f})"
                if lo.get("lower_bound") is not None and lo.get("test_success") is not None else "")
        lines.append(f"- World {lo['world_seed']} is left out: {lo['why']}{figs}.")
    if block.get("one_world_only"):
        lines.append("- Not pooled (ran on one world only): " + ", ".join(
            f"`{a}` (world {w})" for a, w in block["one_world_only"].items()) + ".")
    if block["config_differences"]:
        lines.append("- The runs differ in: " + ", ".join(f"`{k}`" for k in block["config_differences"]) + ".")
    return "\n".join(lines).rstrip() + "\n"
