"""The report's plots, as PNG (for the page) and SVG (for a paper), from matplotlib's canvases (no global
pyplot state)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from evalmislead_assets.report.formatting import level_label
from evalmislead_assets.study.conditions import CONDITION_NAMES, THINKING_MODES


def _png(fig, fmt: str = "png") -> bytes:
    """The figure as PNG (90 dpi) or SVG (vector, text kept as paths so it renders the same everywhere)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    if fmt == "svg":
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    else:
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def rates_plot(rates: pd.DataFrame, fmt: str = "png") -> bytes | None:
    """Misleading and effective rate per condition, one panel per thinking mode, with intervals."""
    if rates.empty:
        return None
    from matplotlib.figure import Figure

    modes = [m for m in THINKING_MODES if (rates["thinking"] == m).any()]
    fig = Figure(figsize=(5.2 * len(modes), 3.8))
    axes = fig.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    for ax, mode in zip(axes, modes):
        r = rates[rates["thinking"] == mode].set_index("condition").reindex(
            [c for c in CONDITION_NAMES if c in set(rates.loc[rates["thinking"] == mode, "condition"])])
        x = np.arange(len(r))
        for k, (name, color) in enumerate((("misleading", "#c0392b"), ("effective", "#2e86c1"))):
            val = r[f"{name}_rate"].astype(float).to_numpy() * 100
            lo = r[f"{name}_ci_low"].astype(float).to_numpy() * 100
            hi = r[f"{name}_ci_high"].astype(float).to_numpy() * 100
            err = np.nan_to_num(np.vstack([val - lo, hi - val]), nan=0.0).clip(min=0)
            ax.bar(x + (k - 0.5) * 0.38, np.nan_to_num(val), 0.38, yerr=err, capsize=3, color=color, label=name)
        ax.set_xticks(x, [c.replace("_", "\n") for c in r.index], fontsize=7)
        ax.set_ylabel("% of all tests")
        ax.set_title(f"thinking {mode}")
        ax.legend(fontsize=8)
    level = level_label(float(rates["level"].iloc[0]))
    fig.suptitle(f"Rates per condition ({level} cluster-adjusted Wilson intervals)", fontsize=10)
    return _png(fig, fmt)


def truncation_plot(rates: pd.DataFrame, fmt: str = "png") -> bytes | None:
    """Answers that hit the token cap, and those that also yielded no test, per condition and mode."""
    if rates.empty:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6))
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
    ax.set_xticks(x, [c.replace("_", "\n") for c in conds], fontsize=7)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("answers")
    ax.set_title("Truncation by condition", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig, fmt)
