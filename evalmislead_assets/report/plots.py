"""The report's plots, as PNG (for the page) and SVG (for a paper), from matplotlib's canvases (no global
pyplot state)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from evalmislead_assets.report.formatting import level_label
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES

#: the plots' text size (points) and resolution: a figure 9 inches or wider is at least 900 px in the PNG
FONT_PT = 11
DPI = 100
#: a bar resting on fewer tests than this carries its n
FEW_TESTS = 30


def _png(fig, fmt: str = "png") -> bytes:
    """The figure as PNG (100 dpi) or SVG (vector, text kept as paths so it renders the same everywhere)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    if fmt == "svg":
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    else:
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _style(ax, title: str = "") -> None:
    """11 pt everywhere on an axis: ticks, labels, title, legend."""
    ax.tick_params(labelsize=FONT_PT)
    ax.xaxis.label.set_size(FONT_PT)
    ax.yaxis.label.set_size(FONT_PT)
    if title:
        ax.set_title(title, fontsize=FONT_PT + 1)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT_PT)


def rates_plot(rates: pd.DataFrame, fmt: str = "png") -> bytes | None:
    """Misleading and effective rate per condition, one panel per thinking mode, with intervals; a condition
    with few tests shows its n above its bars, one with none says "not estimable" (no bar at 0)."""
    if rates.empty:
        return None
    modes = [m for m in THINKING_MODES if (rates["thinking"] == m).any()]
    fig = _figure(max(10.0, 6.5 * len(modes)), 5.6)
    axes = fig.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    highest = 0.0
    for ax, mode in zip(axes, modes):
        r = rates[rates["thinking"] == mode].set_index("condition").reindex(
            [c for c in CONDITION_NAMES if c in set(rates.loc[rates["thinking"] == mode, "condition"])])
        x = np.arange(len(r))
        n = r["n_tests"].fillna(0).astype(int).to_numpy()
        top = np.zeros(len(r))
        for k, (name, color) in enumerate((("misleading", "#c0392b"), ("effective", "#2e86c1"))):
            val = r[f"{name}_rate"].astype(float).to_numpy() * 100
            lo = r[f"{name}_ci_low"].astype(float).to_numpy() * 100
            hi = r[f"{name}_ci_high"].astype(float).to_numpy() * 100
            val = np.where(n > 0, val, np.nan)  # no tests: no bar, never a 0
            err = np.nan_to_num(np.vstack([val - lo, hi - val]), nan=0.0).clip(min=0)
            ax.bar(x + (k - 0.5) * 0.38, np.nan_to_num(val), 0.38, yerr=err, capsize=3, color=color, label=name)
            top = np.fmax(top, np.nan_to_num(np.fmax(val, hi)))
        for i in range(len(r)):
            if n[i] == 0:
                ax.text(x[i], 1, "0 tests:\nnot estimable", ha="center", va="bottom", fontsize=FONT_PT - 1)
            elif n[i] < FEW_TESTS:
                ax.text(x[i], top[i] + 1.5, f"n={n[i]}", ha="center", va="bottom", fontsize=FONT_PT - 1)
        ax.set_xticks(x, [c.replace("_", "\n") for c in r.index])
        ax.set_ylabel("% of all tests")
        highest = max(highest, float(np.nanmax(top, initial=0.0)))
        _style(ax, f"thinking {mode}")
    axes[0].set_ylim(0, min(105.0, max(20.0, 1.15 * highest + 6)))  # the panels share it; room for the n labels
    fig.suptitle(f"Rates per condition ({level_label(float(rates['level'].iloc[0]))} cluster-adjusted Wilson "
                 f"intervals; n = tests where fewer than {FEW_TESTS})", fontsize=FONT_PT + 1)
    return _png(fig, fmt)


def forest_plot(comp: pd.DataFrame, thinking: str, fmt: str = "png",
                planned: list[dict] | None = None) -> bytes | None:
    """The primary comparisons of ``thinking``: each one's estimate (points) and its interval, one row per
    comparison, a line at 0; a comparison with a side of 0 tests is labelled "not estimable" (no point), one of
    ``planned`` (the plan's comparisons) without a stored row "not computed"."""
    c = comp[comp["thinking"] == thinking].sort_values("comparison_id") if len(comp) else comp
    if c.empty:
        return None
    if planned:
        have = set(c["comparison_id"].astype(int))
        extra = pd.DataFrame([{"comparison_id": int(p["id"]), "metric": p["metric"], "condition_a": p["condition_a"],
                               "condition_b": p["condition_b"], "_absent": True}
                              for p in planned if int(p["id"]) not in have])
        c = pd.concat([c, extra], ignore_index=True).sort_values("comparison_id") if len(extra) else c
    fig = _figure(10.0, 1.2 + 0.75 * len(c))
    ax = fig.subplots()
    y = np.arange(len(c))[::-1]
    labels, lo_all, hi_all = [], [0.0], [0.0]
    for yi, (_, x) in zip(y, c.iterrows()):
        labels.append(f"#{int(x['comparison_id'])} {str(x['metric']).replace('_', ' ')}:\n"
                      f"{x['condition_a']} − {x['condition_b']}")
        if x.get("_absent") is True:
            ax.text(0, yi, "not computed (no stored rows)", ha="center", va="center", fontsize=FONT_PT,
                    bbox={"facecolor": "white", "edgecolor": "#999999"})
            continue
        est, lo, hi = (float(x[k]) if not pd.isna(x[k]) else np.nan for k in ("estimate", "ci_low", "ci_high"))
        empty = int(x.get("n_tests_a") or 0) == 0 or int(x.get("n_tests_b") or 0) == 0
        if empty or np.isnan(est):
            ax.text(0, yi, "not estimable", ha="center", va="center", fontsize=FONT_PT,
                    bbox={"facecolor": "white", "edgecolor": "#999999"})
            continue
        ax.errorbar(100 * est, yi, xerr=[[100 * (est - lo)], [100 * (hi - est)]] if not np.isnan(lo) else None,
                    fmt="o", color="#c0392b" if "misleading" in str(x["metric"]) else "#2e86c1", capsize=5,
                    markersize=7, linewidth=2)
        ax.text(100 * est, yi + 0.15, f"{100 * est:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]",
                fontsize=FONT_PT - 1, va="bottom", ha="center")
        lo_all.append(100 * lo if not np.isnan(lo) else 100 * est)
        hi_all.append(100 * hi if not np.isnan(hi) else 100 * est)
    ax.axvline(0, color="black", linewidth=1)
    span = max(abs(min(lo_all)), abs(max(hi_all)), 5.0) * 1.15
    ax.set_xlim(-span, span)
    ax.set_ylim(-0.7, len(c) - 0.3)
    ax.set_yticks(y, labels)
    level = level_label(float(c["level"].dropna().iloc[0]))
    ax.set_xlabel(f"difference a − b (percentage points), {level} paired-bootstrap interval")
    _style(ax, f"The primary comparisons (thinking {thinking}): a difference only where the interval excludes 0")
    return _png(fig, fmt)


def truncation_plot(rates: pd.DataFrame, fmt: str = "png") -> bytes | None:
    """Answers that hit the token cap, and those that also yielded no test, per condition and mode."""
    if rates.empty:
        return None
    fig = _figure(10.0, 4.8)
    ax = fig.subplots()
    conds = [c for c in CONDITION_NAMES if c in set(rates["condition"])]
    x = np.arange(len(conds))
    modes = [m for m in THINKING_MODES if (rates["thinking"] == m).any()]
    width = 0.8 / (2 * len(modes))
    for i, mode in enumerate(modes):
        r = rates[rates["thinking"] == mode].set_index("condition").reindex(conds)
        for j, (col, hatch) in enumerate((("n_truncated", ""), ("n_truncated_no_tests", "//"))):
            off = (2 * i + j - (2 * len(modes) - 1) / 2) * width
            ax.bar(x + off, r[col].fillna(0).to_numpy(), width, hatch=hatch,
                   color=("#7f8c8d", "#e67e22")[i], edgecolor="black", linewidth=0.4,
                   label=f"{mode}: {'hit the cap' if j == 0 else 'hit the cap, zero tests'}")
    ax.set_xticks(x, [c.replace("_", "\n") for c in conds])
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("answers")
    _style(ax, "Truncation by condition")
    return _png(fig, fmt)
