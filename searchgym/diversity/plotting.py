"""Plot helpers of the report: a font with CJK glyphs when labels need one, and the verdict plots.

CJK font: matplotlib's default DejaVu Sans has no Han, kana or Hangul glyphs (labels come out as boxes).
When a plot label holds such characters, the first font found is added as a fallback family: one shipped by
the ``mplfonts`` package (``pip install mplfonts``: Noto Sans CJK SC), else an installed system font whose
name says CJK (Noto Sans CJK, Source Han, WenQuanYi, SimHei…). None found: the plots are still written, and
``cjk_font()`` says None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

_CJK_CHARS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_CJK_NAMES = ("Noto Sans CJK", "Noto Serif CJK", "Source Han", "WenQuanYi", "SimHei", "Droid Sans Fallback",
              "AR PL", "IPAexGothic", "Noto Sans SC", "Noto Sans JP", "Noto Sans KR")


@lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The family name of a font with CJK glyphs, registered with matplotlib; None when there is none."""
    from matplotlib import font_manager

    try:
        import mplfonts  # type: ignore[import-untyped]

        d = os.path.join(os.path.dirname(mplfonts.__file__), "fonts")
        for fname in ("NotoSansCJKsc-Regular.otf", "SimHei.ttf", "NotoSansMonoCJKsc-Regular.otf"):
            path = os.path.join(d, fname)
            if os.path.exists(path):
                font_manager.fontManager.addfont(path)
                return str(font_manager.FontProperties(fname=path).get_name())
    except ImportError:
        pass
    for f in font_manager.fontManager.ttflist:
        if any(n.lower() in f.name.lower() for n in _CJK_NAMES):
            return str(f.name)
    return None


def needs_cjk(texts: Iterable[str]) -> bool:
    return any(_CJK_CHARS.search(t or "") for t in texts)


def use_cjk_if_needed(texts: Iterable[str]) -> str | None:
    """Add a CJK fallback family to matplotlib's sans-serif list when ``texts`` need one; its name."""
    if not needs_cjk(texts):
        return None
    name = cjk_font()
    if name is None:
        return None
    import matplotlib

    # an explicit list of families: matplotlib falls back glyph by glyph along it (a generic "sans-serif"
    # family is not expanded into such a list)
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", name]
    return name


def integer_ticks(ax: Any) -> None:
    """Steps are integers: no tick at step 0.25 or 1.75."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def verdict_plots(runs: dict[str, Any], plt: Any, save: Callable[[Any, str, str], None]) -> None:
    """Per run with a trend: stacked strategy shares per step (which strategy took over) and the strategy
    entropy per step at equal n with its bootstrap CI."""
    for name, r in runs.items():
        tr = r.get("trend")
        if not tr:
            continue
        steps = tr["steps"]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
        classes = [c for c, v in tr["shares"].items() if any(x > 0 for x in v)]
        ax1.stackplot(steps, [tr["shares"][c] for c in classes], labels=classes)
        ax1.set_ylim(0, 1)
        ax1.set_xlabel("step", fontsize=8)
        ax1.set_ylabel("share of queries", fontsize=8)
        ax1.set_title(f"{name}: strategy shares per step", fontsize=9)
        ax1.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        pts = tr["strategy_entropy"]
        ys = [p["value"] for p in pts]
        lo = [p["value"] - p["ci"][0] if p["ci"][0] is not None else 0.0 for p in pts]
        hi = [p["ci"][1] - p["value"] if p["ci"][1] is not None else 0.0 for p in pts]
        ax2.errorbar(steps, ys, yerr=[lo, hi], marker="o", ms=3, capsize=2)
        ch = tr["change"]
        ax2.set_title(f"strategy entropy per step (n = {tr['n']}, 95% CI); change {round(ch['diff'] or 0.0, 2) + 0.0:+.2f}",
                      fontsize=9)
        ax2.set_xlabel("step", fontsize=8)
        ax2.set_ylabel("nats", fontsize=8)
        for ax in (ax1, ax2):
            integer_ticks(ax)
            ax.tick_params(labelsize=7)
        fig.subplots_adjust(left=0.06, right=0.98, top=0.9, bottom=0.14, wspace=0.55)
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:80]
        save(fig, f"verdict_{safe}.png", f"Verdict: {name} over steps ({tr['verdict']})")
