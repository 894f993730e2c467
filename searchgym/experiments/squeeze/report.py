"""The squeeze experiment's text: ``report.md`` / ``report.html`` and the README headline, from ``summary.json``."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from searchgym.experiments.squeeze.config import SHIFT_SPLITS
from searchgym.experiments.squeeze.plots import make_plots
from searchgym.experiments.squeeze.stats import COMPARED


def _verdict_note(summary: dict[str, Any], arm: str, fig: str) -> str:
    """What the seeds allow one to say of ``arm`` minus continued SFT on ``fig``."""
    d = ((summary.get("comparisons") or {}).get(f"{arm}_vs_sft") or {}).get(fig) or {}
    if d.get("ci") is None:
        return " — fewer than 2 seeds per arm: no interval, not a finding"
    return "" if d["detectable"] else " — but the 95% CI covers 0: no detectable difference"


def comparison_lines(summary: dict[str, Any]) -> list[str]:
    """Headline lines: each arm minus continued SFT with its 95% CI and MDE; 'no detectable difference' when
    the interval covers 0."""
    comp = summary.get("comparisons") or {}
    out = []
    for key, row in comp.items():
        arm = key[: -len("_vs_sft")]
        label = summary["arms"][arm]["label"]
        parts = []
        for fig, name in COMPARED:
            d = row.get(fig) or {}
            if d.get("diff") is None:
                continue
            if d.get("ci") is None:
                parts.append(f"{name} {d['diff']:+.3f} (one seed: no interval)")
            else:
                verdict = ""
                if not d["detectable"]:
                    m = d.get("margin")
                    verdict = ", no detectable difference" + (
                        "" if m is None else f"; equivalent within ±{m:g}" if d.get("equivalent")
                        else f"; not shown equivalent within ±{m:g} (inconclusive)")
                parts.append(f"{name} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] "
                             f"(MDE {d['mde']:.3f}{verdict})")
        if parts:
            out.append(f"- {label} − continued SFT: " + "; ".join(parts) + ".")
    return out


def passk_section(summary: dict[str, Any]) -> list[str]:
    """The report's pass@k-at-large-k table (mean [95% CI] per k) and its generated crossing sentences."""
    pk = summary.get("passk")
    if not pk:
        return []
    lines = ["", "## pass@k up to large k (held-out splits)", "",
             (f"{pk['samples']} samples per question at the evaluation temperature on a fixed pool of questions per "
              "split; unbiased pass@k (Chen et al.). SFT start: 95% bootstrap CI over questions; arms: mean over "
              "the seeds evaluated, 95% t-interval over those seeds when there are >= 2, else that seed's "
              "bootstrap CI over questions (the two kinds of interval are not the same quantity: a seed interval "
              "holds the questions fixed).")]
    ks = [str(k) for k in pk["ks"]]
    for split, st in pk["start"].items():
        lines += ["", f"**{split}** ({pk['questions'].get(split, '?')} questions)", "",
                  "| model | seeds | " + " | ".join(f"k={k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 2)]

        def cell(v: dict | None) -> str:
            if not v or v.get("mean") is None:
                return "–"
            ci = v.get("ci")
            return f"{v['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else f"{v['mean']:.3f}"

        lines.append("| SFT start | – | " + " | ".join(cell(st.get(k)) for k in ks) + " |")
        for arm, b in pk["arms"].items():
            label = summary["arms"].get(arm, {}).get("label", arm)
            lines.append(f"| {label} | {len(pk['seeds'].get(arm, []))} | "
                         + " | ".join(cell((b.get(split) or {}).get(k)) for k in ks) + " |")
    lines += ["", *[f"- {s}" for s in pk.get("sentences", {}).values()]]
    return lines


def entropy_law_section(summary: dict[str, Any]) -> list[str]:
    """The report's entropy-law paragraph and table."""
    el = summary.get("entropy_law")
    if not el:
        return []
    lines = ["", "## Entropy law over training", "",
             ("Fit of R = −a·exp(H) + b (Cui et al. 2025) by nonlinear least squares per RL arm, on every policy "
              "step of every seed pooled. **R here is the mean rollout reward on the train question pool during "
              "training (the arm's own rollouts), not held-out performance**, and H is the mean token entropy "
              "of the agent's tokens in those rollouts; b − a is the reward the fit predicts once token entropy "
              "is exhausted (H = 0). The law is stated for runs without an entropy intervention; arms marked "
              "'yes' change entropy on purpose (KL, entropy bonus, Clip-Cov, KL-Cov, count bonus, DARLING) and "
              "are shown for comparison only."), "",
             "| arm | intervention | points | a | b | ceiling b − a | RMSE | note |", "|---|---|---|---|---|---|---|---|"]
    for arm, f in el.items():
        lab = f.get("label", arm)
        note = "" if f.get("ok") else (f.get("reason") or "no fit")
        lines.append(f"| {lab} | {'yes' if f.get('intervention') else 'no'} | {f.get('n', 0)} | {_g(f.get('a'))} | "
                     f"{_g(f.get('b'))} | {_g(f.get('ceiling'))} | {_g(f.get('rmse'))} | {note} |")
    return lines


def _f(v: Any, nd: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{nd}f}"


def _g(v: Any) -> str:
    """Three significant digits (for small figures such as a log-ratio of 1e-5)."""
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"


def _msd(b: dict | None, nd: int = 3) -> str:
    if not b or b.get("mean") is None:
        return "–"
    if len(b.get("values", [])) > 1 and b.get("ci"):  # mean ± half-width of the 95% t-interval over seeds
        return f"{b['mean']:.{nd}f} ± {(b['ci'][1] - b['ci'][0]) / 2:.{nd}f}"
    return f"{b['mean']:.{nd}f}"


def headline_table(summary: dict[str, Any]) -> list[str]:
    st = summary["start"]
    shifts = [s for s in SHIFT_SPLITS if s in st["shift"]]
    head = ["arm", "seeds", "train success", "test success", "strategy entropy", "template entropy (slot)",
            "effective # templates",
            "grounded share", "slot entropy (well-formed)", "token entropy",
            *[f"{s.replace('shift_', 'shift: ')}" for s in shifts]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| SFT start (warm start) | – | " + " | ".join(
        [_msd(st["train_success"]), _msd(st.get("test_success")), _msd(st.get("strategy_entropy")),
         _msd(st["slot_entropy"]), _msd(st["slot_effective_number"], 1),
         _msd(st.get("grounded_share")), _msd(st.get("well_formed_slot_entropy")),
         _msd(st["token_entropy"]), *[_msd(st["shift"][s]) for s in shifts]]) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | {b['seeds']} | " + " | ".join(
            [_msd(b["train_success"]), _msd(b.get("test_success")), _msd(b.get("strategy_entropy")),
             _msd(b["slot_entropy"]), _msd(b["slot_effective_number"], 1),
             _msd(b.get("grounded_share")), _msd(b.get("well_formed_slot_entropy")),
             _msd(b["token_entropy"]), *[_msd(b["shift"].get(s)) for s in shifts]]) + " |")
    return lines


def findings_text(summary: dict[str, Any]) -> list[str]:
    st = summary["start"]
    out = []
    s0, h0 = st["train_success"]["mean"], st["slot_entropy"]["mean"]
    for b in summary["arms"].values():
        s1, h1 = b["train_success"]["mean"], b["slot_entropy"]["mean"]
        out.append(f"- **{b['label']}**: train success {_f(s0)} → {_f(s1)}; query-template entropy {_f(h0)} → "
                   f"{_f(h1)} nats (effective number {_f(st['slot_effective_number']['mean'], 1)} → "
                   f"{_f(b['slot_effective_number']['mean'], 1)}); rollout reward over training "
                   f"{_f(b['rollout_reward_first'])} → {_f(b['rollout_reward_last'])}.")
    f = summary["findings"]
    if "rl_squeezes_more_than_sft" in f:
        g, s = summary["arms"]["grpo"], summary["arms"]["sft"]
        verdict = "squeezes the query templates more than" if f["rl_squeezes_more_than_sft"] else \
            "does not squeeze the query templates more than"
        out.append(f"- In this run GRPO {verdict} continued SFT (template-entropy change "
                   f"{_f(f['grpo']['slot_entropy_delta'])} vs {_f(f['sft']['slot_entropy_delta'])} nats; "
                   f"{g['seeds']} vs {s['seeds']} seed(s))" + _verdict_note(summary, "grpo", "slot_entropy") + ".")
    improves = f.get("rl_improves_train_reward") or {}
    if improves:
        yes = [summary["arms"][a]["label"] for a, v in improves.items() if v]
        no = [summary["arms"][a]["label"] for a, v in improves.items() if not v]
        out.append(f"- RL improves train success over its SFT start in {len(yes)} of {len(improves)} RL arms"
                   + (f" (not: {', '.join(no)})." if no else "."))
    out.extend(comparison_lines(summary))
    out.extend(_shift_finding(summary))
    out.extend(_floor_line(summary))
    out.extend(_dose_lines(summary))
    out.extend(_gate_line(summary))
    return out


def _cmd(c: dict[str, Any]) -> str:
    """The command that produced a run, from its config."""
    if c.get("quick"):
        return "searchgym squeeze --quick"
    name = c.get("preset_name") or "default"
    return "searchgym squeeze" + ("" if name == "default" else f" --preset {name}")


def _dose_lines(summary: dict[str, Any]) -> list[str]:
    """The RL dose in one line: per RL arm, the last KL of its rollouts to the SFT start and whether the arm moved
    the LM (train success +0.15 or KL >= 0.1, issue 21 §3)."""
    dose = {a: d for a, d in (summary.get("dose") or {}).items() if d.get("moved") is not None}
    if not dose:
        return []
    labels = {a: (summary["arms"].get(a) or {}).get("label", a) for a in dose}
    moved = [labels[a] for a, d in dose.items() if d["moved"]]
    own = summary["config"].get("sft_kl_learning_rate")  # sft_kl trains at its own rate (None: the RL arms')
    parts = [f"{labels[a]} {_f(d.get('kl_to_start_last'))}" + (f" (at lr {own:g})" if a == "sft_kl" and own else "")
             for a, d in dose.items()]
    c = summary["config"]["rl"]
    return [f"- Dose ({c['total_steps']} steps at lr {c['learning_rate']:g}): final per-token KL of the rollouts to "
            f"the SFT start: {'; '.join(parts)}. {len(moved)} of {len(dose)} "
            f"arms moved the LM (train success +0.15 or KL ≥ 0.1)" + (f" ({', '.join(moved)})." if moved else
                                                    ": at this dose a null is a null of a policy that barely moved.")]


def _gate_line(summary: dict[str, Any]) -> list[str]:
    comp = summary.get("competence") or {}
    if not comp.get("passed"):
        return []
    start = summary.get("sft_start") or {}
    src = start.get("source")
    where = {"shipped": "shipped with the package", "path": f"from {start.get('path')}"}.get(src, "trained in this run")
    k = comp.get("successes")
    n = comp.get("questions")
    return [f"- The SFT start ({where}) passes "
            f"the competence gate: on its own {n} test questions"
            + (f" ({k:.1f} solved)" if k is not None else "")
            + f" the 95% Wilson lower bound of its success is {_f(comp.get('lower_bound'))} ≥ {comp.get('gate')} "
              "(the tables' test success is on the evaluation's smaller question set)."]


def _shift_mean(block: dict[str, Any]) -> float | None:
    vals = [v.get("mean") for v in (block.get("shift") or {}).values()]
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def _shift_finding(summary: dict[str, Any]) -> list[str]:
    """One line on what the shift splits show: the mean success over them for the SFT start and every arm."""
    means = {"SFT start": _shift_mean(summary["start"])}
    means.update({b["label"]: _shift_mean(b) for b in summary["arms"].values()})
    means = {k: v for k, v in means.items() if v is not None}
    if "SFT start" not in means:
        return []
    line = ("- Shift-split success (mean over " + ", ".join(summary["start"]["shift"]) + "): "
            + ", ".join(f"{k} {_f(v)}" for k, v in means.items()) + ".")
    if max(means.values()) < 0.1:
        line += (" All are near the floor: this model barely transfers to held-out phrasings, families and entity "
                 "types, so differences between arms here are a few questions, not a finding.")
    return [line]


def _floor_line(summary: dict[str, Any]) -> list[str]:
    """The shift splits whose start is under 0.2: they cannot show a loss (issue 31 §3)."""
    fl = summary.get("shift_floor") or {}
    low = [f"{sp} ({_f(v['start'])})" for sp, v in fl.items() if v.get("cannot_show_loss")]
    if not low:
        return []
    return [f"- Cannot show a loss (the SFT start's success is under 0.2): {', '.join(low)}."]


def endpoints_table(summary: dict[str, Any]) -> list[str]:
    """Per arm, the endpoints fixed in advance beside the primary one (endpoints.py)."""
    arms = {a: b for a, b in summary["arms"].items() if "train_success_change" in b}
    if not arms:
        return []
    st = summary["start"]

    def kl_last(b: dict[str, Any]) -> str:
        ks = [k for k in ((b.get("kl_to_start") or {}).get("mean") or []) if k is not None]
        return _f(ks[-1]) if ks else "–"

    def rf(d: Any) -> str:
        return _f(d.get("mean") if isinstance(d, dict) else d)

    lines = [("| arm | KL to start (last step) | train success − start | template entropy, rarefied | without "
             "copy-question queries | copy rate | follows the rename (shift_homonym) |"), "|---|---|---|---|---|---|---|",
             (f"| SFT start | 0 | – | {_f(st.get('template_entropy_rarefied'))} | "
             f"{_f(st.get('template_entropy_rarefied_no_copy'))} | {_f(st.get('copy_rate'))} | "
             f"{rf((st.get('rename_follow_rate') or {}).get('shift_homonym'))} |")]
    for b in arms.values():
        lines.append(f"| {b['label']} | {kl_last(b)} | {_ms_ci(b['train_success_change'])} | "
                     f"{_ms_ci(b['template_entropy_rarefied'])} | {_ms_ci(b['template_entropy_rarefied_no_copy'])} | "
                     f"{_ms_ci(b['copy_rate'])} | {rf((b.get('rename_follow_rate') or {}).get('shift_homonym'))} |")
    return lines


_VERDICT_WORDS = {"rl_specific": "**yes**", "not_rl_specific": "no: a control moves as far",
                  "no_change": "no change vs continued SFT", "unknown": "– (no interval)"}


def _diff_cell(d: dict[str, Any]) -> str:
    if d.get("diff") is None:
        return "–"
    ci = d.get("ci")
    return f"{d['diff']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def rl_specific_table(summary: dict[str, Any]) -> list[str]:
    """GRPO against continued SFT and the two controls per endpoint, with the pre-registered verdict
    (endpoints.rl_specific_block)."""
    return _rl_specific_lines(summary.get("rl_specific"), "mean difference [95% Welch CI over seeds]")


def rl_specific_random_effects_table(worlds: dict[str, Any] | None) -> list[str]:
    """The same table with the controls runs' worlds as random effects (endpoints.rl_specific_random_effects)."""
    re_ = (worlds or {}).get("controls_random_effects")
    if not re_:
        return []
    ws = ", ".join(str(w) for w in re_["worlds"])
    return _rl_specific_lines(re_, f"worlds {ws} as random effects: estimate [95% CI, DerSimonian–Laird, t on "
                                   f"{re_['k_worlds'] - 1} df]")


def _rl_specific_lines(rs: dict[str, Any] | None, how: str) -> list[str]:
    if not rs or not rs.get("endpoints"):
        return []
    lines = [(f"**Is it RL's?** GRPO − each arm per endpoint ({how}); a change is RL's only where GRPO differs from "
              "continued SFT, rejection-sampling SFT and shuffled-reward GRPO, all on the same side:"), "",
             "| endpoint | − continued SFT | − rejection-sampling SFT | − shuffled-reward GRPO | RL's? |",
             "|---|---|---|---|---|"]
    for key, e in rs["endpoints"].items():
        lines.append(f"| `{key}` | {_diff_cell(e['vs_sft'])} | {_diff_cell(e['vs_rs_sft'])} | "
                     f"{_diff_cell(e['vs_grpo_shuffled'])} | {_VERDICT_WORDS.get(e['verdict'], e['verdict'])} |")
    return lines


def _gate_warning(summary: dict[str, Any]) -> list[str]:
    comp = summary.get("competence")
    if not comp or comp.get("passed"):
        return []
    return [(f"**COMPETENCE GATE FAILED: the SFT start solves {_f(comp.get('test_success'))} of unseen test "
             f"questions (95% Wilson lower bound {_f(comp.get('lower_bound'))}; gate {comp['gate']} on the lower "
             "bound). Every LM finding below is unusable**: the policy is too weak for its query strategy to "
             "matter."), ""]


def _worst_shift(shifts: dict[str, dict[str, Any]]) -> str:
    """The shift split where GRPO loses most to continued SFT, with its interval and its Holm-adjusted p over
    all the shift splits (a split's own interval can exclude 0 by chance when there are six)."""
    worst = min(shifts, key=lambda k: shifts[k]["diff"])
    ph = shifts[worst].get("p_holm")
    holm = "" if ph is None else (f"; Holm p {_g(ph)} over {len(shifts)} shift splits" +
                                  ("" if ph < 0.05 else ": not significant"))
    return f"{worst[6:]} {_d(shifts[worst])}{holm}"


def _d(d: dict[str, Any] | None) -> str:
    """A comparison ``diff [lo, hi]`` with its verdict (difference / equivalent / inconclusive)."""
    if not d or d.get("diff") is None:
        return "–"
    if not d.get("ci"):
        return f"{d['diff']:+.3f} (one seed)"
    v = d.get("verdict") or ("difference" if d.get("detectable") else "no detectable difference")
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}] ({v})"


def headline_summary(summary: dict[str, Any], worlds: dict[str, Any] | None = None) -> str:
    """The README's short headline (at most 8 lines): the LM's gate and its RL-vs-SFT verdicts (with ``worlds``,
    a :func:`~searchgym.experiments.squeeze.worlds.worlds_block`: also pooled over world seeds), the organism's
    collapse, what it cost and which remedies kept a mix, each figure with its interval; the full results block
    (:func:`headline_markdown`) goes to the docs page."""
    c = summary["config"]
    cmd = _cmd(c)
    lines = [(f"**The squeeze experiment** (`{cmd}`: {summary['model']}, {c['seeds']} seed(s) per arm, "
              f"{c['rl']['total_steps']} RL steps; intervals are 95%; full results in "
              "[docs/squeeze.md](docs/squeeze.md)):")]
    comp = summary.get("competence") or {}
    gate = "passed" if comp.get("passed") else "FAILED, so the LM rows below are not findings"
    lines.append(f"- LM competence gate: test success {_f(comp.get('test_success'))}, Wilson lower bound "
                 f"{_f(comp.get('lower_bound'))} vs {comp.get('gate')}: {gate}.")
    g = (summary.get("comparisons") or {}).get("grpo_vs_sft")
    if g:
        shifts = {k: v for k, v in g.items() if k.startswith("shift:") and v.get("diff") is not None}
        lines.append(f"- LM, GRPO − continued SFT: strategy entropy {_d(g.get('strategy_entropy'))}; test success "
                     f"{_d(g.get('test_success'))}" + (f"; worst shift split {_worst_shift(shifts)}." if shifts
                                                       else "."))
    if worlds and (worlds.get("random_effects") or {}).get("grpo"):
        lines = [lines[0], *random_effects_short(worlds, summary)]  # the headline's intervals (issue 31 §5)
    elif worlds and "grpo" in worlds["arms"]:
        from searchgym.experiments.squeeze.worlds import worlds_short

        lines.append(f"- {worlds_short(worlds)}")
    sp = summary.get("strategy_policy")
    if sp and "grpo" in sp["arms"]:
        st, gr = sp["start"], sp["arms"]["grpo"]
        ss = "shift_strategy"
        lines.append(f"- Organism (one strategy per question): GRPO strategy entropy {_ms_ci(st['strategy_entropy'])}"
                     f" → {_ms_ci(gr['strategy_entropy'])} nats; {ss} success {_ms_ci(st['shift_success'].get(ss))} → "
                     f"{_ms_ci(gr['shift_success'].get(ss))}.")
        keep = [a for a in ("grpo_count", "grpo_darling") if a in sp["arms"]]
        if keep:
            lines.append("- Remedies that keep a mix: " + "; ".join(
                f"{a} entropy {_ms_ci(sp['arms'][a]['strategy_entropy'])}, {ss} "
                f"{_ms_ci(sp['arms'][a]['shift_success'].get(ss))}" for a in keep) + ".")
    ctx = (summary.get("organism") or {}).get("contextual")
    if ctx:
        r = {a: b["routing_share"] for a, b in ctx["arms"].items()}
        fired = ctx["findings"].get("positive_control_fired")
        lines.append(f"- Mixed train split ({ctx['split']['minority_share']:.0%} nickname questions only `entity` "
                     "solves): seeds routing them, " + ", ".join(
                         f"{a} {v['k']}/{v['n']} [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
                         for a, v in r.items() if a in ("sft", "rs_sft", "grpo", "grpo_critique", "grpo_darling"))
                     + f"; positive control {'fired' if fired else 'did NOT fire'}.")
    return "\n".join(lines[:8]) + "\n"


def _re(e: dict[str, Any]) -> str:
    """``estimate [lo, hi]`` of a random-effects endpoint (DL, t on k − 1 df)."""
    if e.get("estimate") is None:
        return "–"
    if not e.get("ci"):
        return f"{_sg(e['estimate'])} (no interval)"
    return f"{_sg(e['estimate'])} [{_sg(e['ci'][0])}, {_sg(e['ci'][1])}]"


def _sg(x: float) -> str:
    t = f"{x:+.3f}"
    return "+0.000" if t == "-0.000" else t


def _sgn(x: float | None) -> str:
    return "–" if x is None else _sg(x)


def _shown(e: dict[str, Any]) -> bool:
    ci = e.get("ci")
    return bool(ci and (ci[0] > 0 or ci[1] < 0))


def random_effects_short(worlds: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """The README's LM lines from the worlds' random effects (GRPO − continued SFT): reward first, then the
    primary endpoint, the template squeeze and how much of it is the copy rate, then the primary cost and the
    shift splits that can show one. A claim whose interval covers 0 is said to be not shown."""
    re_ = worlds["random_effects"]["grpo"]
    e = re_["endpoints"]
    ws = ", ".join(str(w) for w in sorted(int(k) for k in re_["starts_per_world"]))
    tr, pe, te = e["train_success"], e[re_["primary_endpoint"]], e["slot_entropy"]
    cost = e[re_["primary_cost_endpoint"]]
    spw = re_["starts_per_world"]
    starts = ("one SFT start per world" if set(spw.values()) == {1} else
              "SFT starts per world " + ", ".join(f"{w}: {n}" for w, n in sorted(spw.items(), key=lambda x: int(x[0]))))
    out = [f"- LM, GRPO − continued SFT with worlds {ws} as random effects (DerSimonian–Laird, t on "
           f"{re_['k_worlds'] - 1} df; {starts}, gated starts only): RL "
           + ("raised" if _shown(tr) and tr["estimate"] > 0 else "did **not** raise")
           + f" train success ({_re(tr)}) at the shipped dose."]
    pe_word = "lower" if _shown(pe) and pe["estimate"] < 0 else "not shown"
    hk = (pe.get("hksj") or {}).get("ci")
    out.append(f"- Primary endpoint, strategy entropy rarefied to a common count: {_re(pe)} nats ({pe_word}; "
               + (f"HKSJ [{_sg(hk[0])}, {_sg(hk[1])}]; " if hk else "") + "borderline: a small effect)."
               if pe_word == "lower" else f"- Primary endpoint, strategy entropy (rarefied): {_re(pe)}: not shown.")
    cp = _copy_rates(worlds)
    out.append(f"- Template entropy {_re(te)} nats" + (" holds" if _shown(te) else ": not shown")
               + (f", mostly one surface change: GRPO stops copying the question (copy rate {cp})." if cp else "."))
    eq = bool(cost.get("ci") and -0.05 < cost["ci"][0] and cost["ci"][1] < 0.05)
    out.append(f"- Primary cost, test success: {_re(cost)}: "
               + ("a difference." if _shown(cost) else ("equivalent within ±0.05." if eq else
                                                        "no difference shown, and **not** equivalent within ±0.05.")))
    sh = e.get("shift:shift_homonym")
    floor = _floor_splits(worlds)
    if sh:
        out.append(f"- `shift_homonym` (the one shift split whose start is above 0.2{floor}): {_re(sh)}: "
                   + _cost_words(sh, (worlds.get("shift_cost") or {}).get("shift_homonym")) + _controls_clause(worlds))
    return out


def _cost_words(e: dict[str, Any], rule: dict[str, Any] | None) -> str:
    """The headline's word on a shift split's loss: a cost only by the pre-registered rule (endpoints.
    shift_cost_block) when worlds.json carries it, else only "a loss"."""
    if not (_shown(e) and e["estimate"] < 0):
        return "no cost shown under random effects."
    if not rule or rule["verdict"] == "unknown":
        return ("a loss; whether it is a cost of collapse is not known (" + (rule or {}).get(
            "why", "no in-distribution or shuffled-reward comparison") + ").")
    if rule["verdict"] == "cost":
        return (f"a cost: it exceeds the in-distribution loss on {rule['family']} questions "
                f"({_sg(rule['in_distribution_loss'])}) and shuffled-reward GRPO's ({_sg(rule['shuffled_loss'])}).")
    return f"a loss, but **not** a cost of collapse by the pre-registered rule: {rule['why']}."


_CLAUSE_WORDS = {"rl_specific": "RL's", "not_rl_specific": "not RL's", "no_change": "no change",
                 "unknown": "unknown"}


def _controls_clause(worlds: dict[str, Any]) -> str:
    """The headline's word on the controls: whether GRPO's change in the primary endpoint, template entropy and
    ``shift_homonym`` is RL's (endpoints.rl_specific_verdict), with the controls runs' worlds as random effects
    when there are two or more, else per controls run (``--controls``)."""
    runs = worlds.get("controls") or []
    if not runs:
        return (" Not yet compared with rejection-sampling SFT or shuffled-reward GRPO, so no squeeze here is "
                "shown to be RL's.")

    def v(e: dict[str, Any], key: str) -> str:
        return _CLAUSE_WORDS.get((e.get(key) or {}).get("verdict", "unknown"), "unknown")

    def part(e: dict[str, Any]) -> str:
        return (f"strategy entropy {v(e, 'strategy_entropy_rarefied')}, template entropy {v(e, 'slot_entropy')}, "
                f"`shift_homonym` {v(e, 'shift:shift_homonym')}")

    re_ = worlds.get("controls_random_effects")
    if re_:
        rs = (re_["endpoints"].get("strategy_entropy_rarefied") or {}).get("vs_rs_sft") or {}
        return (f" Against rejection-sampling SFT and shuffled-reward GRPO, worlds {', '.join(map(str, re_['worlds']))}"
                f" as random effects: {part(re_['endpoints'])} (RL's: GRPO differs from all three arms on the same "
                f"side; strategy entropy GRPO − rejection-sampling SFT {_diff_cell(rs)}).")
    parts = [f"on world {c['world']} ({c['seeds']} seeds): {part(c['rl_specific']['endpoints'])}" for c in runs]
    return (" Against rejection-sampling SFT and shuffled-reward GRPO " + "; ".join(parts)
            + " (RL's: GRPO differs from all three arms on the same side).")


def _copy_rates(worlds: dict[str, Any]) -> str:
    """``continued SFT a–b vs GRPO c–d`` over the worlds' runs (from their summaries' question-copy rates)."""
    import json

    rates: dict[str, list[float]] = {"sft": [], "grpo": []}
    for p in worlds.get("runs") or []:
        try:
            s = json.loads(Path(p).read_text())
        except (OSError, ValueError, TypeError):
            return ""
        for a, vals in rates.items():
            v = ((s.get("arms") or {}).get(a) or {}).get("question_copy_rate") or {}
            if v.get("mean") is not None:
                vals.append(float(v["mean"]))
    if not rates["sft"] or not rates["grpo"]:
        return ""
    return (f"continued SFT {min(rates['sft']):.2f}–{max(rates['sft']):.2f}, GRPO "
            f"{min(rates['grpo']):.2f}–{max(rates['grpo']):.2f}")


def _floor_splits(worlds: dict[str, Any]) -> str:
    """``; the other N start under 0.2 and cannot show a loss`` from the worlds' runs, '' when unknown."""
    import json

    low: set[str] = set()
    for p in worlds.get("runs") or []:
        try:
            s = json.loads(Path(p).read_text())
        except (OSError, ValueError, TypeError):
            return ""
        for sp, v in ((s.get("start") or {}).get("shift") or {}).items():
            if v.get("mean") is not None and v["mean"] < 0.2:
                low.add(sp)
    return f"; the other {len(low)} start under 0.2 and cannot show a loss" if low else ""


def _ms_ci(d: dict[str, Any] | None) -> str:
    """``mean ± half`` (strategy-policy form) or ``mean [lo, hi]``."""
    if not d or d.get("mean") is None:
        return "–"
    ci = d.get("ci")
    if isinstance(ci, (int, float)):
        return f"{d['mean']:.3f} ± {ci:.3f}"
    if ci:
        return f"{d['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{d['mean']:.3f}"


def headline_markdown(summary: dict[str, Any], worlds: dict[str, Any] | None = None) -> str:
    """The docs page's results block: the LM table and findings, with ``worlds`` (a
    :func:`~searchgym.experiments.squeeze.worlds.worlds_block`) the comparison pooled over world seeds, then the
    strategy policy's."""
    from searchgym.experiments.squeeze.worlds import worlds_markdown

    c = summary["config"]
    lines = [
        (f"**RL vs SFT on the embedded world** ({summary['model']}, {summary['n_params'] / 1e6:.2f}M parameters, "
        f"{c['seeds']} seed(s) per arm, {c['rl']['total_steps']} policy steps of "
        f"{c['rl']['prompts_per_step']}×{c['rl']['group_size']} episodes; evaluation: {c['eval_samples']} samples "
        f"per question at T={c['eval_temperature']}; wall time {summary['wall_s'] / 60:.1f} min on "
        f"{summary['device']}). Produced by `{_cmd(c)}`; table cells are "
        "the mean over seeds ± the half-width of its 95% t-interval:"),
        "",
        *_gate_warning(summary),
        *headline_table(summary),
        "",
        *(["Endpoints fixed in advance (docs/squeeze.md), per arm (mean [95% CI over seeds]):", "",
           *endpoints_table(summary), ""] if endpoints_table(summary) else []),
        *([*rl_specific_table(summary), ""] if rl_specific_table(summary) else []),
        *findings_text(summary),
        *_random_effects_section(worlds),
        *(["", *rl_specific_random_effects_table(worlds)] if rl_specific_random_effects_table(worlds) else []),
        *shift_cost_table(worlds),
        *(["", worlds_markdown(worlds).rstrip()] if worlds and worlds.get("arms") else []),
        *_strategy_section(summary),
    ]
    return "\n".join(lines) + "\n"


def _ci_sgn(ci: list[float] | None) -> str:
    return f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""


def shift_cost_table(worlds: dict[str, Any] | None) -> list[str]:
    """The pre-registered cost rule per shift split that can show a loss (worlds.json ``shift_cost``)."""
    rows = (worlds or {}).get("shift_cost") or {}
    if not rows:
        return []
    lines = ["", ("**Is a shift loss a cost?** (pre-registered: GRPO − continued SFT on the split, worlds and starts as "
                  "random effects, must exceed GRPO − continued SFT on train questions of the same type, mean over "
                  "the same runs, and shuffled-reward GRPO − continued SFT on the split, mean over the controls "
                  "runs; beside each mean its t interval over the runs, for reading only):"), "",
             "| split | loss (random effects) | question type | in-distribution loss | shuffled-reward loss | verdict |",
             "|---|---|---|---|---|---|"]
    for sp, r in rows.items():
        lines.append(f"| `{sp}` | {_re(r['loss'])} | {r['family'] or '–'} "
                     f"| {_sgn(r['in_distribution_loss'])}{_ci_sgn(r.get('in_distribution_ci'))} "
                     f"({r['in_distribution_units']} runs) "
                     f"| {_sgn(r['shuffled_loss'])}{_ci_sgn(r.get('shuffled_ci'))} ({r['shuffled_runs']} runs) "
                     f"| {r['verdict'].replace('_', ' ')}: {r['why']} |")
    return lines


def _random_effects_section(worlds: dict[str, Any] | None) -> list[str]:
    """The headline's intervals: every pooled arm − continued SFT with worlds as random effects."""
    blocks = (worlds or {}).get("random_effects") or {}
    if not blocks:
        return []
    from searchgym.experiments.squeeze.random_effects import random_effects_lines

    pe = (worlds or {}).get("primary_endpoints") or {}
    lines = ["", (f"**Worlds as random effects** (the headline's intervals; primary endpoint `{pe.get('primary')}`, "
                  f"primary cost endpoint `{pe.get('primary_cost')}`, fixed in advance; DerSimonian–Laird with a t "
                  "interval on k − 1 df, HKSJ beside it; the fixed-effect 'pooled' columns below are secondary):"), ""]
    for b in blocks.values():
        lines += [*random_effects_lines(b), ""]
    return lines[:-1]


def _strategy_section(summary: dict[str, Any]) -> list[str]:
    """The strategy-policy table and its computed findings (absent when the stage was disabled)."""
    block = summary.get("strategy_policy")
    if not block:
        return []
    from searchgym.experiments.squeeze.strategy_stage import strategy_findings, strategy_table

    lines = ["", (f"**Strategy policy** (one heuristic query strategy chosen per question; exact success; "
                  f"{block['seeds']} seeds per arm, mean [95% CI]; env preset `{block['preset']}`):"), "",
             *strategy_table(block), "", *strategy_findings(block)]
    ctx = (summary.get("organism") or {}).get("contextual")
    if ctx:
        from searchgym.experiments.squeeze.organism import contextual_sentences, contextual_table

        lines += ["", ("**Strategy policy on a mixed train split** (a minority family whose best strategy is not the "
                       "majority's; mean [95% CI] over seeds, routing share with a Wilson CI):"), "",
                  *contextual_table(ctx), "", *contextual_sentences(ctx)]
    return lines


def verdict_paragraph(summary: dict[str, Any]) -> str:
    """Issue 21 §5: the answer in one paragraph. For the LM (when its start passes the gate) and for the organism:
    did RL squeeze the strategies against continued SFT (with the interval), what it cost on which split, which
    remedies kept a mix, and at what dose. Every figure is one the tables carry."""
    parts: list[str] = []
    comp = summary.get("competence") or {}
    c = summary.get("config") or {}
    rl = c.get("rl") or {}
    dose = {a: d for a, d in (summary.get("dose") or {}).items() if d.get("moved") is not None}
    at = f"{rl.get('total_steps')} steps at lr {rl.get('learning_rate', 0):g}" if rl else "this dose"
    if comp and not comp.get("passed"):
        parts.append(f"The LM answers nothing: its SFT start fails the competence gate (Wilson lower bound "
                     f"{_f(comp.get('lower_bound'))} < {comp.get('gate')}).")
    elif (summary.get("comparisons") or {}).get("grpo_vs_sft"):
        g = summary["comparisons"]["grpo_vs_sft"]
        moved = [a for a, d in dose.items() if d["moved"]]
        kl = (dose.get("grpo") or {}).get("kl_to_start_last")
        shifts = {k: v for k, v in g.items() if k.startswith("shift:") and v.get("diff") is not None}
        se = g.get("strategy_entropy") or {}
        said = {"difference": "differs from", "equivalent": "is equivalent to"}.get(
            se.get("verdict") or "", "is not distinguishable from")
        parts.append(
            f"For the LM ({c.get('seeds')} seed(s) per arm, {at}; GRPO's final KL to its start {_f(kl)}, "
            f"{len(moved)} of {len(dose)} RL arms moved it), GRPO's strategy entropy {said} continued SFT's "
            f"({_d(se)})" + (f"; its largest cost is on {_worst_shift(shifts)}" if shifts else "") + ".")
        rem = [k[:-len("_vs_sft")] for k in summary["comparisons"] if k.endswith("_vs_sft") and k != "grpo_vs_sft"]
        if rem:
            parts.append("Remedies against continued SFT, strategy entropy: " + "; ".join(
                f"{summary['arms'].get(a, {}).get('label', a)} "
                f"{_d(summary['comparisons'][a + '_vs_sft'].get('strategy_entropy'))}" for a in rem) + ".")
    sp = summary.get("strategy_policy")
    if sp and "grpo" in sp.get("arms", {}):
        st, gr, ss = sp["start"], sp["arms"]["grpo"], "shift_strategy"
        keep = [a for a, b in sp["arms"].items() if a not in ("sft", "grpo")
                and (b["shift_success"].get(ss) or {}).get("ci") and (st["shift_success"].get(ss) or {}).get("ci")
                and b["shift_success"][ss]["ci"][1] >= st["shift_success"][ss]["ci"][0]]
        se_st, se_gr = st["strategy_entropy"], gr["strategy_entropy"]
        fell = bool(se_st.get("ci") and se_gr.get("ci") and se_gr["ci"][1] < se_st["ci"][0])
        parts.append(f"For the organism ({sp['seeds']} seeds, {sp['steps']} steps), GRPO "
                     f"{'squeezes' if fell else 'does not detectably lower'} its strategy entropy from {_ms_ci(st['strategy_entropy'])} to {_ms_ci(gr['strategy_entropy'])} nats and "
                     f"{ss} success from {_ms_ci(st['shift_success'].get(ss))} to "
                     f"{_ms_ci(gr['shift_success'].get(ss))}; continued SFT ends at "
                     f"{_ms_ci((sp['arms'].get('sft') or {}).get('strategy_entropy'))} nats; "
                     + (f"the remedies whose {ss} success stays within reach of the start's: {', '.join(keep)}."
                        if keep else f"no remedy keeps {ss} success within reach of the start's."))
    ctx = (summary.get("organism") or {}).get("contextual")
    if ctx:
        r = {a: b["routing_share"] for a, b in ctx["arms"].items()}
        best = max(r, key=lambda a: r[a]["k"]) if r else None
        fired = (ctx.get("findings") or {}).get("positive_control_fired")
        parts.append("On the mixed train split, the seeds whose policy routes the minority family: "
                     + ", ".join(f"{a} {v['k']}/{v['n']}" for a, v in r.items())
                     + (f" (most: {best}, Wilson [{r[best]['ci'][0]:.2f}, {r[best]['ci'][1]:.2f}])"
                        if best and r[best]["k"] else " (none routes)")
                     + f"; the positive control {'fires' if fired else 'does NOT fire, so a null here says nothing'}.")
    return " ".join(parts)


# What the full LM run found (`make squeeze` + `make squeeze-worlds`: worlds 0, 1, 5, 6 seeds per arm; GRPO −
# continued SFT with worlds as random effects, from results/squeeze-{default,world1,world5}-v3; recomputed from
# those files by tests/test_squeeze_report_demo.py). A 1-seed run cannot say more, so its report quotes this.
FULL_RUN_FINDING = ("GRPO did not raise train success (−0.023 [−0.063, +0.016]); it lowered query-template "
                    "entropy (−0.371 [−0.612, −0.130] nats), mostly by no longer copying the question, and strategy "
                    "entropy only slightly (−0.087 [−0.167, −0.006]); test success: no difference shown "
                    "(+0.000 [−0.067, +0.066])")


def _demo_lead(summary: dict[str, Any]) -> list[str]:
    """A run with fewer than 2 seeds per LM arm (the demo): lead with what it CAN show, the strategy policy's
    collapse under GRPO, every term defined where it first appears; the LM part in one line: a pipeline check,
    and what the full run found."""
    sp = summary.get("strategy_policy")
    lines = ["## Verdict: what this run shows", ""]
    if sp and "grpo" in sp.get("arms", {}):
        st, gr = sp["start"], sp["arms"]["grpo"]
        sft = (sp["arms"].get("sft") or {}).get("strategy_entropy")
        lines.append(
            f"**The strategy policy collapses under GRPO.** The *strategy policy* (elsewhere called the "
            f"*organism*) is a small softmax policy that picks one of {len(sp['strategies'])} heuristic query "
            "strategies for each question (look the entity up, copy the question, decompose it, ...); every "
            "strategy's success on every question was measured once in the real environment, so training it takes "
            "seconds and its figures are exact. Its *strategy entropy* (the Shannon entropy, in nats, of the share "
            f"of questions given each strategy; {math.log(len(sp['strategies'])):.2f} = all equally often, 0 = one "
            f"strategy for everything) falls from {_ms_ci(st['strategy_entropy'])} at the SFT start to "
            f"{_ms_ci(gr['strategy_entropy'])} after {sp['steps']} GRPO steps ({sp['seeds']} seeds, 95% CI), while "
            f"train success goes {_ms_ci(st['train_success'])} → {_ms_ci(gr['train_success'])}"
            + (f"; continued SFT (more supervised steps on the demonstrator's choices) ends at {_ms_ci(sft)} nats."
               if sft else "."))
        lines.append("")
    c = summary["config"]
    lines.append(f"**The LM part is a pipeline check, not a finding**: {c['seeds']} seed per arm and "
                 f"{c['rl']['total_steps']} RL steps give no interval. The full run (`make squeeze`, 3 worlds × 6 "
                 f"seeds) found: {FULL_RUN_FINDING}.")
    return [*lines, ""]


def _report_verdict(summary: dict[str, Any]) -> list[str]:
    """The findings in words: one paragraph (:func:`verdict_paragraph`), then the gate, the LM arms, the strategy
    policy and the mixed split, without the tables they rest on. A run with < 2 seeds per LM arm leads with
    :func:`_demo_lead` and keeps its LM lines as details."""
    if int(summary["config"].get("seeds") or 0) < 2:
        return [*_demo_lead(summary), "## Details", "", *_gate_warning(summary),
                *[f"- LM pipeline check: {x[2:]}" if x.startswith("- ") else x for x in findings_text(summary)],
                *_organism_details(summary), ""]
    para = verdict_paragraph(summary)
    lines = ["## Verdict", "", *([f"**In one paragraph.** {para}", ""] if para else []), *_gate_warning(summary),
             *findings_text(summary), *_organism_details(summary)]
    return [*lines, ""]


def _organism_details(summary: dict[str, Any]) -> list[str]:
    block = summary.get("strategy_policy")
    if not block:
        return []
    from searchgym.experiments.squeeze.strategy_stage import strategy_findings

    lines = ["", *strategy_findings(block)]
    ctx = (summary.get("organism") or {}).get("contextual")
    if ctx:
        from searchgym.experiments.squeeze.organism import contextual_sentences

        lines += ["", *contextual_sentences(ctx)]
    return lines


def _report_tables(summary: dict[str, Any]) -> list[str]:
    """The headline's tables (LM arms, strategy policy, mixed split), with their captions."""
    hm = headline_markdown(summary).splitlines()
    keep = [ln for ln in hm if ln.startswith(("|", "**")) or not ln.strip()]
    return ["## Tables", "", *keep, ""]


def render_markdown(summary: dict[str, Any], images: dict[str, str]) -> str:
    """The report: the verdict first, then the plots, then the tables and the setup."""
    c = summary["config"]
    demos = summary.get("demos") or {}
    plots = ["## Plots", ""]
    for title, fname in images.items():
        plots += [f"### {title}", "", f"![{title}](plots/{fname})", ""]
    lines = [
        "# RL squeezes, SFT expands? — query-strategy diversity of a search agent",
        "",
        *_report_verdict(summary),
        *plots,
        *_report_tables(summary),
        "## Setup",
        "",
        (f"- World: seed {c['world_seed']}, {c['n_entities']} entities; BM25 top-{c['top_k']}, "
        f"{c['max_turns']} searches per episode, passages cut to {c['passage_chars']} characters."),
        (f"- Demonstrations: the `diverse` heuristic agent, {c['demo_passes']} passes over the train questions: "
        f"{demos.get('demos', '–')} episodes, EM {_f(demos.get('demo_em'))}, kept {demos.get('demos_kept', '–')} "
        f"{'successful ' if c['demo_success_only'] else ''}ones for SFT."),
        f"- SFT warm start: {demos.get('steps', '–')} steps, final loss {_f(demos.get('final_loss'))}.",
        (f"- RL: GRPO (group-normalised advantages), token-mean PPO-clip loss (ε={c['rl']['clip_low']}), "
        f"lr {c['rl']['learning_rate']}, T={c['rl']['temperature']}; KL-Cov k={c['kl_cov_ratio']} (β=1), "
        f"Clip-Cov r={c['clip_cov_ratio']} band (1, 5) with PPO clip 1; entropy bonus {c['ent_coef']}."),
        (f"- Questions: the RL arms train on a fixed pool of {c['eval_questions']} train-split questions (the "
         "same questions per step for every arm); 'train success' is the success on that pool, shift-split "
         f"success is on {c['eval_shift_questions']} questions per shift split; {c['eval_samples']} samples per "
         "question."),
        ("- Continued SFT: fresh diverse demonstrations over the whole train split; its policy is sampled on the "
         "RL arms' questions at every step (these samples feed the tracker; they are not trained on)."),
        ("- Template entropy: Shannon entropy (nats) of the slot-level query templates (entities and numbers "
        "masked into typed slots) of all queries in the evaluation samples / step rollouts, from the same "
        "analysis core as `searchgym analyze`. Grounded share: queries that are neither malformed nor off-task "
        "(naming nothing from the question or earlier evidence); 'well-formed' entropy is over those only, so a "
        "squeeze that is only noise going away shows there as no change."),
        "",
    ]
    lines += ["## Per-family success (train split)", ""]
    fams = sorted(summary["start"]["per_family"])
    lines.append("| model | " + " | ".join(fams) + " |")
    lines.append("|" + "---|" * (len(fams) + 1))
    lines.append("| SFT start | " + " | ".join(_f(summary["start"]["per_family"].get(f)) for f in fams) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | " + " | ".join(_f(b["per_family"].get(f)) for f in fams) + " |")
    lines += ["", "## pass@k (train split)", ""]
    ks = sorted(int(k) for k in summary["start"]["pass_at_k"])
    lines.append("| model | " + " | ".join(f"k={k}" for k in ks) + " |")
    lines.append("|" + "---|" * (len(ks) + 1))
    lines.append("| SFT start | " + " | ".join(_f(summary["start"]["pass_at_k"][str(k)]) for k in ks) + " |")
    for b in summary["arms"].values():
        lines.append(f"| {b['label']} | " + " | ".join(_f(b["pass_at_k"].get(str(k))) for k in ks) + " |")
    lines += passk_section(summary)
    lines += entropy_law_section(summary)
    ctl = [b for b in summary["arms"].values() if (b.get("controls") or {}).get("control")]
    if ctl:
        lines += ["", "## Did each control act?", "",
                  ("Means over steps and seeds of the training log. Clip-Cov/KL-Cov act when they select tokens "
                  "while the ratio moves (|log ratio| > 1e-4); the KL arm when KL to the SFT start is > 0."), "",
                  ("| arm | control | acted | mini-batches/batch | clip fraction | mean abs log ratio | "
                  "cov-selected share | KL to ref |"), "|---|---|---|---|---|---|---|---|"]
        for b in ctl:
            c = b["controls"]
            lines.append(f"| {b['label']} | {c['control']} | {'yes' if c['acted'] else '**no**'} | "
                         f"{c['minibatches']} | {_g(c['clip_fraction'])} | {_g(c['abs_log_ratio'])} | "
                         f"{_g(c['cov_selected_share'])} | {_g(c['kl_ref'])} |")
    lines += ["", (f"Wall time: {summary['wall_s']:.0f} s. Files: `summary.json` (all numbers), "
              "`arms/<arm>/seed<k>/metrics.jsonl` (training scalars), `.../diversity.jsonl` (tracker), "
              "`.../eval_trajectories.jsonl` (evaluation episodes, analysable with `searchgym analyze`)."), ""]
    return "\n".join(lines)


def _md_to_html(md: str, out: Path) -> str:
    """A small markdown renderer for this report (headings, tables, lists, images, paragraphs)."""
    import re

    def inline(s: str) -> str:
        s = html.escape(s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        s = re.sub(r"`(.+?)`", r"<code>\1</code>", s)
        return s

    body: list[str] = []
    toc: list[tuple[str, str]] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not re.match(r"^\|(\s*:?-+:?\s*\|)+\s*$", lines[i]):  # not an alignment row
                    rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            body.append("<table>" + "".join(
                "<tr>" + "".join(f"<{'th' if r == 0 else 'td'}>{inline(c)}</{'th' if r == 0 else 'td'}>"
                                 for c in row) + "</tr>" for r, row in enumerate(rows)) + "</table>")
            continue
        m = re.match(r"^!\[(.*?)\]\((.*?)\)$", ln)
        if m:
            p = out / m.group(2)
            if p.exists():
                data = base64.b64encode(p.read_bytes()).decode()
                body.append(f'<p><img alt="{html.escape(m.group(1))}" src="data:image/png;base64,{data}"></p>')
        elif ln.startswith("#"):
            n = len(ln) - len(ln.lstrip("#"))
            if n == 2:
                toc.append((f"s{len(toc)}", ln[n:].strip()))
                body.append(f"<h2 id='{toc[-1][0]}'>{inline(toc[-1][1])}</h2>")
            else:
                body.append(f"<h{n}>{inline(ln[n:].strip())}</h{n}>")
        elif ln.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{inline(lines[i][2:])}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
            continue
        elif ln.strip():
            body.append(f"<p>{inline(ln)}</p>")
        i += 1
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}"
             "img{max-width:100%}")
    nav = ("<nav id='toc'><b>Contents</b><ol>" + "".join(f"<li><a href='#{a}'>{inline(t)}</a></li>" for a, t in toc)
           + "</ol></nav>")
    if body and body[0].startswith("<h1"):
        body.insert(1, nav)
    else:
        body.insert(0, nav)
    return f"<!doctype html><html><head><meta charset='utf-8'><title>squeeze report</title><style>{style}</style>" \
           f"</head><body>{''.join(body)}</body></html>"


def write_report(summary: dict[str, Any], out: Path) -> None:
    from searchgym.train.checkpoint import atomic_write_text

    images = make_plots(summary, out / "plots")
    md = render_markdown(summary, images)
    atomic_write_text(out / "report.md", md)
    atomic_write_text(out / "report.html", _md_to_html(md, out))

