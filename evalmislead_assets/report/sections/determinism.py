"""Report section "Run-to-run noise (determinism probe)": the probe's n, both shares, the partitions and the
sensitivity lines (the numbers: analysis/determinism.py)."""

from __future__ import annotations

import pandas as pd

from evalmislead_assets.analysis.determinism import TABLE, by_partition, not_run_reason, summarize
from evalmislead_assets.analysis.determinism_sensitivity import sensitivity
from evalmislead_assets.report.formatting import level_label, md_table, missing, pct, points

SECTION_TABLES = (TABLE, "bootstrap_comparisons", "test_outcomes", "generated_tests", "truncation_matched_subset")

TITLE = "Run-to-run noise (determinism probe)"


def settings_line(probe: pd.DataFrame) -> str:
    def values(col: str) -> str:
        vals = sorted({str(v) for v in probe[col] if not missing(v)}) if col in probe else []
        return ", ".join(vals) or "unknown"

    return (f"original answers: slots {values('original_total_slots')}, cache_prompt "
            f"{values('original_cache_prompt')}, build {values('original_build_info')}; probe: slots "
            f"{values('probe_total_slots')}, cache_prompt {values('probe_cache_prompt')}, "
            f"build {values('probe_build_info')}")


def section(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The report section: the probe's n, both shares, the partitions and the sensitivity lines."""
    probe = frames.get(TABLE, pd.DataFrame())
    summary = summarize(probe)
    if summary.drawn == 0:
        return ["_The determinism probe has not run (materialize `determinism_probe`): run-to-run noise of the "
                "single generation per problem is not measured._"]
    reason = not_run_reason(probe)
    if reason is not None:
        return [f"_The determinism probe did not run ({reason}): run-to-run noise of the single generation per "
                "problem is not measured. Nothing else in this report depends on it; materialize "
                "`determinism_probe` again once the server answers._"]
    if summary.n == 0:
        return [f"_The determinism probe re-sent {summary.drawn} requests and got no answer "
                f"({summary.errors} errors): run-to-run noise is not measured._"]
    L = [f"A seeded sample of stored test-generation requests was re-sent byte for byte with the response cache "
         f"bypassed, and each new answer was extracted and scored like the originals "
         f"({summary.n} answers compared" + (f", {summary.errors} requests failed" if summary.errors else "") + ").",
         "",
         f"- byte-identical answers: **{summary.identical} of {summary.n}** ({pct(summary.share_identical)})",
         f"- answers whose tests score identically (same test ids, same outcomes): "
         f"**{summary.tests_identical} of {summary.n}** ({pct(summary.share_tests_identical)})",
         f"- server settings: {settings_line(probe)}",
         "", md_table(by_partition(probe)), ""]
    sens = sensitivity(probe, frames.get("bootstrap_comparisons", pd.DataFrame()), frames.get("test_outcomes"),
                       frames.get("generated_tests"), frames.get("truncation_matched_subset"))
    if sens.empty:
        L.append("_Sensitivity: no comparison stored (materialize `bootstrap_comparisons`)._")
    else:
        L += ["Sensitivity (spread over k = 2 generations of the probed answers, shown on each comparison): the "
              "stored estimate, then the estimate with the re-generations of the probed answers among that "
              "comparison's problems (for thinking on, the truncation-matched subset) swapped in for their stored "
              "outcomes; a byte-identical answer keeps its stored outcomes. Only the probed answers were re-drawn; "
              "a full re-run re-draws every answer and can move an estimate more.", "",
              *sensitivity_lines(sens)]
    return L


def sensitivity_lines(sens: pd.DataFrame) -> list[str]:
    """One line per stored comparison: its estimate and interval, and how far the probed answers move it
    (the rows: analysis.determinism_sensitivity.sensitivity)."""
    out = []
    for s in sens.itertuples(index=False):
        name = (f"{str(s.metric).replace('_', ' ')}, `{s.condition_a}` − `{s.condition_b}` "
                f"(thinking {s.thinking}{'' if s.role == 'primary' else ', report-only'}"
                f"{', truncation-matched subset' if s.subset == 'truncation_matched' else ''})")
        level = "CI" if missing(s.level) else level_label(float(s.level))
        stored = f"{points(s.estimate)} points [{level}: {points(s.ci_low)}, {points(s.ci_high)}]"
        outside = (f"; {s.n_outside} probed answers of these conditions are outside this comparison's problems "
                   "and left out" if s.n_outside else "")
        if missing(s.shift):
            out.append(f"- {name}: {stored}; run-to-run shift not measured ({s.not_measured}){outside}.")
        else:
            out.append(f"- {name}: {stored}; with the {s.n_probed} probed answers of its problems re-generated "
                       f"({s.n_changed} with cell counts other than the stored ones): "
                       f"{points(s.estimate_swapped)} points (shift {points(s.shift)}){outside}.")
    return out
