"""The report's tables: (title, note, header, rows), one builder per group of figures, in report order."""

from __future__ import annotations

from typing import Any

from searchgym.diversity.core import DEFINITIONS
from searchgym.diversity.moves import MOVES
from searchgym.diversity.strategy import STRATEGIES
from searchgym.diversity.templates import TEXT_LEVELS


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{round(v, 3) + 0.0:.3f}" if abs(v) < 1e4 else f"{v:.3g}"  # never -0.000
    return str(v)


def _ci(c: Any) -> str:
    if not c or c[0] is None or c[1] is None:
        return "–"
    return f"[{_fmt(c[0])}, {_fmt(c[1])}]"


_LEVEL_COLS = ("n", "entropy", "entropy_ci", "hill 0", "hill 1", "hill 2", "mi_question", "within_question_entropy")


def _level_row(name: str, st: dict[str, Any] | None) -> list[str]:
    if not st:
        return [name, *(["–"] * len(_LEVEL_COLS))]
    h = st.get("hill") or {}
    groups = st.get("within_question_groups") or 0
    within = f"{_fmt(st.get('within_question_entropy'))} ({groups} q)" if groups else "– (no question has ≥ 2)"
    mi = st.get("mi_question")
    mi_s = f"{_fmt(mi)} (k={st.get('mi_k')}, {st.get('mi_questions')} q)" if mi is not None else "–"
    return [name, str(st.get("n")), _fmt(st.get("entropy")), _ci(st.get("entropy_ci")), _fmt(h.get("0")),
            _fmt(h.get("1")), _fmt(h.get("2")), mi_s, within]


Table = tuple[str, str, list[str], list[list[str]]]


def _tables(summary: dict[str, Any]) -> list[Table]:
    """(title, note, header, rows) of every table in the report, in order: one builder per figure group."""
    tables: list[Table] = []
    for build in (_run_tables, _strategy_tables, _level_tables, _divergence_tables, _text_tables,
                  _process_tables, _policy_tables, _template_tables):
        tables.extend(build(summary))
    return tables


def _run_tables(summary: dict[str, Any]) -> list[Table]:
    """Runs (what was read, copy rate, shares) and their warnings."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    rows = [[n, str(r["format"]), str(r["n_episodes"]), str(r["n_queries"]), str(r["n_malformed"]),
             _fmt(r["process"]["queries_per_episode"]), _fmt(r["question_copy_rate"]), _fmt(r["grounded_share"]),
             _fmt(r["malformed_share"]), _fmt(r["off_task_share"]), _fmt(r["policy"].get("reward_mean"))]
            for n, r in runs.items()]
    tables.append(("Runs", ("copy rate = share of queries that copy the question (token overlap ≥ 0.8 both "
                   "ways); grounded = share neither malformed nor off-task; malformed = empty, over 32 words, "
                   "markup or garbage (plus calls the reader could not parse, in the malformed column); "
                   "off-task = names nothing and uses no word from the question or earlier evidence."),
                   ["run", "format", "episodes", "queries", "malformed", "queries/episode", "copy rate",
                    "grounded", "malformed share", "off-task share", "mean reward"], rows))
    rows = [[n, str(c), w] for n in names
            for w, c in zip(runs[n].get("warnings") or [], (runs[n].get("warning_counts") or {}).values())]
    tables.append(("Warnings", "Signs of a wrong reading, or of figures that rest on too little (none = empty).",
                   ["run", "count", "warning"], rows or [["–", "0", "no warnings"]]))
    return tables


def _strategy_tables(summary: dict[str, Any]) -> list[Table]:
    """The strategy classes and where the query words come from."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    rows = [[n, *[_fmt((runs[n].get("strategy") or {}).get("distribution", {}).get(c)) for c in STRATEGIES],
             _fmt(runs[n]["sources"].get("question")), _fmt(runs[n]["sources"].get("evidence")),
             _fmt(runs[n]["sources"].get("neither"))] for n in names]
    tables.append(("Query strategy classes (share of queries)",
                   ("Strategy of each query from the question and the text retrieved earlier in its episode; "
                   "words from: mean share of a query's content words found in the question / else in earlier "
                   "evidence / in neither."),
                   ["run", *STRATEGIES, "words from question", "from evidence", "from neither"], rows))
    return tables


def _level_tables(summary: dict[str, Any]) -> list[Table]:
    """Entropy, Hill numbers and MI of the strategy classes and each template level (all / well-formed), at
    equal n; the plug-in figures over all queries apart."""
    runs, names = summary["runs"], list(summary["runs"])
    meta = summary.get("meta", {})
    levels = meta.get("levels") or list(TEXT_LEVELS)
    sizes = meta.get("n") or {}
    tables: list[Table] = []
    note_eq = ("At equal sample size n for every run (rarefied mean over draws of n queries); CI method below. "
               "hill 0 = distinct labels, 1 = exp(entropy), 2 = inverse Simpson; mi_question = shuffle-corrected "
               "mutual information between question and label with k samples per question; within-question "
               "entropy = mean entropy over questions with ≥ 2 samples (count in brackets).")
    for block, title in (("strategy", "Strategy classes"), *((lv, f"Template level `{lv}`") for lv in levels)):
        rows = [_level_row(n, runs[n].get("strategy") if block == "strategy" else runs[n]["levels"].get(block))
                for n in names]
        tables.append((f"{title}: all queries, n = {sizes.get(block, '–')}", note_eq, ["run", *_LEVEL_COLS], rows))
        rows = [_level_row(n, (runs[n]["well_formed"].get("strategy") if block == "strategy"
                               else runs[n]["well_formed"]["levels"].get(block))) for n in names]
        tables.append((f"{title}: well-formed, grounded queries only, n = {sizes.get('well_formed/' + block, '–')}",
                       ("The same figures without malformed and off-task queries, so noise cannot read as "
                       "diversity."), ["run", *_LEVEL_COLS], rows))
    keys = ("n_queries", "n_templates", "entropy_all", "top1_mass", "top5_mass", "rank_beta",
            "first_query_across_entropy", "first_query_within_entropy")
    for lv in levels:
        rows = [[n, *[_fmt(runs[n]["levels"].get(lv, {}).get(k)) for k in keys]] for n in names]
        tables.append((f"Template level `{lv}`: plug-in over all queries",
                       ("Not comparable between runs of unequal size (n_templates and entropy_all grow with it); "
                       "top1/top5 mass = share of queries in the 1/5 most frequent templates; rank_beta = decay "
                       "of log frequency with rank over the top 10."), ["run", *keys], rows))
    return tables


def _divergence_tables(summary: dict[str, Any]) -> list[Table]:
    """Jensen-Shannon divergence between runs: only the pairs above the same-run noise (split-half JS)."""
    levels = summary.get("meta", {}).get("levels") or list(TEXT_LEVELS)
    div = summary.get("divergence", {})
    js, noise = div.get("js_divergence", {}), div.get("js_noise", {})
    rows, hidden = [], 0
    for lv in [*levels, "strategy"]:
        for pair, v in (js.get(lv) or {}).items():
            a, b = pair.split(" vs ", 1) if " vs " in pair else (pair, pair)
            floor = max((noise.get(lv) or {}).get(a) or 0.0, (noise.get(lv) or {}).get(b) or 0.0)
            if v is None or v <= floor:
                hidden += 1
                continue
            rows.append([lv, pair, _fmt(v), _fmt(floor)])
    if not rows and not hidden:
        return []
    note = ("JS divergence (nats, max ln 2 = 0.693) between the label distributions of two runs, at equal sample "
            "size (draws of the smaller run's count from each); noise = the larger split-half JS of the two runs "
            f"(two random halves of one run). {hidden} pair(s) at or below their noise level are not shown "
            "(all in summary.json).")
    return [("Jensen-Shannon divergence between runs (above the same-run noise)", note,
             ["level", "runs", "JS", "noise"], rows or [["–", "–", "none above the noise", "–"]])]


def _text_tables(summary: dict[str, Any]) -> list[Table]:
    """Text diversity at equal n and within questions; embedding diversity where computed."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    akeys = ("n", "distinct_1", "distinct_2", "self_bleu", "compression_ratio")
    tables.append(("Text diversity at equal sample size", ("distinct-n = unique n-grams / all n-grams; self-BLEU "
                   "= mean BLEU of each query against the others (lower = more diverse); compression ratio = size "
                   "/ gzip size (higher = more repetitive); all at n queries (mean over draws), the same n for "
                   "every run."), ["run", *akeys],
                   [[n, *[_fmt(runs[n].get("text_at_n", {}).get(k)) for k in akeys]] for n in names]))
    tkeys = ("compression_ratio_pos", "distinct_1_within", "distinct_2_within", "self_bleu_within")
    tables.append(("Text diversity within questions", ("compression_ratio_pos = compression ratio of the "
                   "part-of-speech shapes (all queries); _within = mean over questions with ≥ 2 samples."),
                   ["run", *tkeys], [[n, *[_fmt(runs[n]["text"].get(k)) for k in tkeys]] for n in names]))
    if any("embedding" in r for r in runs.values()):
        ekeys = ("mean_pairwise_distance", "chamfer_distance", "vendi_score", "vendi_score_within")
        tables.append(("Embedding diversity", ("mean pairwise cosine distance; chamfer = mean distance to the "
                       "nearest other query; Vendi = exp entropy of the similarity kernel's eigenvalues."),
                       ["run", *ekeys], [[n, *[_fmt(runs[n].get("embedding", {}).get(k)) for k in ekeys]]
                                         for n in names]))
    return tables


def _process_tables(summary: dict[str, Any]) -> list[Table]:
    """The search process: moves, duplicate rate, new-document yield, CTAR, query sequences."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    pkeys = ("duplicate_query_rate", "new_document_yield", "ctar")
    tables.append(("Search process", "; ".join(f"{k} = {DEFINITIONS[k]}" for k in ("move_entropy", *pkeys)),
                   ["run", "move entropy", *pkeys],
                   [[n, _fmt(runs[n]["moves"]["entropy"]), *[_fmt(runs[n]["process"].get(k)) for k in pkeys]]
                    for n in names]))
    skeys = ("level", "distinct", "entropy", "distinct_correct", "episodes_correct", "distinct_incorrect",
             "episodes_incorrect")
    tables.append(("Distinct query sequences per episode (trajectory level)",
                   "An episode's sequence of templates; distinct sequences among correct and incorrect episodes.",
                   ["run", *skeys], [[n, *[_fmt(runs[n]["sequences"].get(k)) for k in skeys]] for n in names]))
    tables.append(("Reformulation moves (counts)", "Moves between consecutive queries of an episode (moves.py).",
                   ["run", *MOVES], [[n, *[str(runs[n]["moves"]["counts"][m]) for m in MOVES]] for n in names]))
    return tables


def _policy_tables(summary: dict[str, Any]) -> list[Table]:
    """The policy side: the entropy law over steps and pass@k."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    rows = []
    for n in names:
        law = runs[n]["policy"].get("entropy_law")
        if law:
            rows.append([n, str(law.get("entropy")), _fmt(law.get("a")), _fmt(law.get("b")),
                         _fmt(law.get("ceiling")), _fmt(law.get("rmse")), _fmt(law.get("n"))])
    if rows:
        tables.append(("Entropy law R = -a exp(H) + b", "Fitted over the steps (Cui et al. 2025); needs ≥ 3 steps.",
                       ["run", "H", "a", "b", "ceiling (H=0)", "RMSE", "points"], rows))
    rows = []
    for n in names:
        c = runs[n]["policy"].get("pass_at_k")
        if c:
            for k, p, ph in zip(c["k"], c["pass_at_k"], c["pass_hat_k"]):
                rows.append([n, str(c["step"]), str(c["n_questions"]), str(k), _fmt(p), _fmt(ph)])
    if rows:
        tables.append(("pass@k and pass^k", ("Unbiased pass@k = 1 - C(n-c,k)/C(n,k) over questions sampled ≥ 2 "
                       "times; pass^k = all k succeed."), ["run", "step", "questions", "k", "pass@k", "pass^k"], rows))
    return tables


def _template_tables(summary: dict[str, Any]) -> list[Table]:
    """The most frequent templates of each run at the primary level."""
    runs, names = summary["runs"], list(summary["runs"])
    tables: list[Table] = []
    meta_levels = summary.get("meta", {}).get("levels") or list(TEXT_LEVELS)
    lv = "slot" if "slot" in meta_levels else meta_levels[0]
    for n in names:
        top = runs[n].get("top_templates", {}).get(lv) or []
        if top:
            tables.append((f"Top `{lv}` templates: {n}", "", ["template", "count"], [[t, str(c)] for t, c in top]))
    return tables
