"""What `evalmislead run` prints at the end: the study in a terminal, from stored rows only.

The per-condition table (tests, four cells, rates), the primary comparisons, one worked
example (a misleading test where there is one: its assertion, and its status on the buggy
and the fixed version) and where the report is. A condition with no executed tests shows
"0 tests: not estimable", never a rate.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evalmislead_assets import study_models
from evalmislead_assets.analysis.determinism import not_run_reason
from evalmislead_assets.analysis.determinism import summarize as summarize_probe
from evalmislead_assets.report import worked_example as example
from evalmislead_assets.report.formatting import NOT_ESTIMABLE, ci, level_label, missing, pct, points
from evalmislead_assets.store.database import Warehouse
from evalmislead_assets.study.conditions import CONDITION_NAMES, CONDITIONS, THINKING_MODES


def rate_text(count: Any, n_tests: Any, rate: Any, lo: Any = None, hi: Any = None) -> str:
    if missing(n_tests) or int(n_tests) == 0 or missing(rate):
        return NOT_ESTIMABLE
    text = f"{pct(rate)} ({int(count)}/{int(n_tests)})"
    if not missing(lo) and not missing(hi):
        text += f" {ci(lo, hi, as_points=False)}"
    return text


def _level(rates: pd.DataFrame) -> str:
    """The stored interval level with a trailing space ("98.75 % "), or "" where no row stores one."""
    levels = rates["level"].dropna() if "level" in rates.columns else pd.Series(dtype=float)
    return f"{level_label(float(levels.iloc[0]))} " if len(levels) else ""


def ordered(rates: pd.DataFrame) -> pd.DataFrame:
    """Rows in the report's order: thinking off first, then the primary conditions (in the protocol's order),
    then the reference ones."""
    def key(row: pd.Series) -> tuple:
        c = row["condition"]
        role = CONDITIONS[c].role if c in CONDITIONS else "other"
        pos = CONDITION_NAMES.index(c) if c in CONDITION_NAMES else len(CONDITION_NAMES)
        return (THINKING_MODES.index(row["thinking"]) if row["thinking"] in THINKING_MODES else 9,
                role != "primary", pos, str(c))

    if rates.empty:
        return rates
    return rates.loc[sorted(rates.index, key=lambda i: key(rates.loc[i]))].reset_index(drop=True)


def rates_table(rates: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, x in ordered(rates).iterrows():
        with_misleading = x.get("problems_with_misleading")
        n_problems = x.get("n_problems")
        rows.append({
            "condition": x["condition"], "thinking": x["thinking"],
            "role": CONDITIONS[x["condition"]].role if x["condition"] in CONDITIONS else "",
            "answers": int(x["n_answers"]),
            "tests": int(x["n_tests"]), "misleading": int(x["n_misleading"]), "effective": int(x["n_effective"]),
            "both pass": int(x["n_both_pass"]), "both fail": int(x["n_both_fail"]),
            "misleading rate [CI]": rate_text(x["n_misleading"], x["n_tests"], x["misleading_rate"],
                                              x.get("misleading_ci_low"), x.get("misleading_ci_high")),
            "effective rate [CI]": rate_text(x["n_effective"], x["n_tests"], x["effective_rate"],
                                             x.get("effective_ci_low"), x.get("effective_ci_high")),
            "problems with a misleading test": "–" if missing(with_misleading) or missing(n_problems)
            else f"{int(with_misleading)}/{int(n_problems)}",
        })
    return pd.DataFrame(rows)


def problems_text(problems: list[int] | None, total: int = 164) -> str:
    """A problem list in a few words: '164 problems (0-163)', '3 problems (0-1, 30)'; None: all ``total``."""
    idx = sorted(set(range(total) if problems is None else problems))
    spans: list[list[int]] = []
    for i in idx:
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    runs = [f"{a}-{b}" if b > a else str(a) for a, b in spans]
    shown = ", ".join(runs[:8]) + (f", ... ({len(runs) - 8} more ranges)" if len(runs) > 8 else "")
    return f"{len(idx)} problem{'' if len(idx) == 1 else 's'} ({shown})"


def caps_text(default_off: int, default_on: int, models: list[Any], modes: list[str]) -> str:
    """The output caps that apply to the modes run: a model's own (its study entry) else the default; one value
    when every model has the same, else each model's."""
    def cap(m: Any, mode: str) -> int:
        own = m.max_tokens_off if mode == "off" else m.max_tokens_on
        return int(own or (default_off if mode == "off" else default_on))

    per = {m.name: " ".join(f"{mode}={cap(m, mode)}" for mode in modes) for m in models}
    if len(set(per.values())) <= 1:
        return f"max_tokens {next(iter(per.values()), '')}".rstrip()
    return "max_tokens " + "; ".join(f"{name}: {text}" for name, text in per.items())


def progress_text(done: int, total: int, sent: int, tokens: int, elapsed: float) -> str:
    """Answers stored of the run's total, and the remaining time at this pace; the new tokens and their rate only
    when requests were sent (a replay answers from the cache: no token was generated)."""
    eta = elapsed / done * (total - done) if done else float("nan")
    pace = (f"{sent} requests sent, {tokens} new tokens ({tokens / max(elapsed, 1e-9):.1f} tok/s), " if sent
            else "no request sent (answers from the cache), ")
    return f"{done}/{total} answers stored in {elapsed:.0f} s; {pace}remaining answers ETA {eta / 60:.1f} min"


def comparisons_table(comp: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, x in comp.iterrows():
        est, lo, hi = x.get("estimate"), x.get("ci_low"), x.get("ci_high")
        if missing(est) or int(x.get("n_tests_a") or 0) == 0 or int(x.get("n_tests_b") or 0) == 0:
            diff = "not estimable"
        else:
            diff = f"{points(est)} {ci(lo, hi)}"
        rows.append({"#": int(x["comparison_id"]), "thinking": x["thinking"],
                     "metric": str(x["metric"]).replace("_", " "),
                     "a - b": f"{x['condition_a']} - {x['condition_b']}", "difference, points [CI]": diff,
                     "verdict": x.get("verdict") or ""})
    return pd.DataFrame(rows)


def worked_example(wh: Warehouse, models: list[str] | None = None) -> list[str]:
    """One stored test with its status on both versions: a misleading one where there is one (of any of
    ``models``, in their order; default: any model), chosen by report.worked_example."""
    order = models or []
    unnamed = study_models.unnamed_rows_model() if order else None
    x = example.pick(lambda sql, params: wh.query_df(sql, params, read_only=True), models=order, unnamed=unnamed)
    if x is None:
        return ["Worked example: no executed test is stored yet."]
    cell = x.outcome.replace("_", " ")
    article = "an" if cell[:1] in "aeiou" else "a"
    kind = "a misleading test" if x.misleading else f"no misleading test stored; {article} {cell} test"
    who = f"model {x.model_name}, " if len(order) > 1 and x.model_name else ""
    out = [f"Worked example ({kind}): {x.task_id} `{x.entry_point}`, {who}condition {x.condition}, "
           f"thinking {x.thinking}, test {x.test_id}"]
    out += [f"    {ln}" for ln in x.assertion()]
    out.append(f"  on the buggy version: {x.buggy_status}; on the fixed version: {x.fixed_status} -> {cell}")
    return out


def llm_calls_line(db: Path, since: datetime | None = None, until: datetime | None = None, who: str = "this run",
                   failed: str = "") -> str:
    """The LLM requests ``who`` sent (llm_calls from ``since`` until ``until``): sent, answered, errors (with the
    first), unfinished. ``failed`` says what failed in that span ("m-a failed"): with no request sent, the line
    says so instead of crediting the cache."""
    wh = Warehouse(db)
    none = f"LLM requests {who}: none sent" + (f" ({failed} before sending one)" if failed else "")
    if not wh.path.exists() or not wh.table_exists("llm_calls"):
        return none
    clauses = [c for c, v in (("ts >= ?", since), ("ts < ?", until)) if v is not None]
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    params = [v for v in (since, until) if v is not None]
    row = wh.query_df(
        "SELECT count(*) AS sent, count(*) FILTER (WHERE state = 'answered' OR (state IS NULL AND error IS NULL)) "
        "AS answered, count(*) FILTER (WHERE state = 'error' OR (state IS NULL AND error IS NOT NULL)) AS errors, "
        "count(*) FILTER (WHERE state = 'sent') AS unfinished, count(*) FILTER (WHERE state = 'abandoned') AS abandoned, "
        f"arg_min(task_id || ': ' || error, ts) FILTER (WHERE error IS NOT NULL) AS first_error FROM llm_calls {where}",
        params).iloc[0]
    if int(row["sent"]) == 0:
        return none if failed else f"{none} (every answer came from the cache)"
    text = (f"LLM requests {who}: {int(row['sent'])} sent, {int(row['answered'])} answered, "
            f"{int(row['errors'])} errors")
    if int(row["unfinished"]) or int(row["abandoned"]):
        text += f", {int(row['unfinished'])} unfinished, {int(row['abandoned'])} abandoned"
    if int(row["errors"]):
        text += f" (errors include retried attempts; first: {' '.join(str(row['first_error']).split())[:240]})"
    return text


def summary_lines(
    db: Path, report_paths: list[Path], since: datetime | None = None, models: list[str] | None = None,
    screening_hint: str = "", failed: str = "", skipped: str = "",
) -> list[str]:
    """The run's closing lines: its LLM requests, each model's rates and comparisons (``models``: the study's,
    rows without a model are the study file's first model's), a worked example, where the report and the data are.
    ``failed``: what failed in this run ("m-a failed"), for the requests line; ``skipped``: a line naming a
    stage the run left out (mutation in a replay) and how to run it."""
    wh = Warehouse(db)
    out: list[str] = ["", llm_calls_line(db, since, failed=failed)]
    names: list[str | None] = list(models) if models else [None]
    for name in names:
        clause, params = ("", []) if name is None else study_models.model_filter_sql(name)
        where = f" WHERE {clause}" if clause else ""
        head = f" [{name}]" if len(names) > 1 else ""
        if wh.table_exists("condition_rates"):
            rates = wh.query_df(f"SELECT * FROM condition_rates{where} ORDER BY thinking, condition", params,
                                read_only=True)
            if len(rates):
                out += ["", f"Per condition{head} (primary conditions first; rate = cell / all tests of the "
                        f"condition; {_level(rates)}cluster-adjusted Wilson interval):",
                        rates_table(rates).to_string(index=False)]
        if wh.table_exists("bootstrap_comparisons"):
            comp = wh.query_df(f"SELECT * FROM bootstrap_comparisons{where} ORDER BY thinking, comparison_id",
                               params, read_only=True)
            if len(comp):
                out += ["", f"Primary comparisons{head} (paired bootstrap over problems):",
                        comparisons_table(comp).to_string(index=False)]
    out += probe_lines(wh, models)
    if skipped:
        out += ["", skipped]
    if wh.table_exists("test_outcomes"):
        out += ["", *worked_example(wh, models)]
        if screening_hint and not _any_misleading(wh):
            out += [screening_hint]
    out.append("")
    out += [f"evalmislead: report at {p}" for p in report_paths if p.exists()]
    viewers = dict.fromkeys(p.parent / "viewer" / "index.html" for p in report_paths if p.name == "report.html")
    out += [f"evalmislead: every answer and test in the viewer: {v}" for v in viewers if v.exists()]
    out.append(f"evalmislead: query the results with: evalmislead sql \"select * from condition_rates\"  (DuckDB {db})")
    return out


def probe_lines(wh: Warehouse, models: list[str] | None = None) -> list[str]:
    """The determinism probe's live sample: how many re-sent answers came back byte-identical, how many score the
    same (in a replay: the user's own server against the recorded answers)."""
    if not wh.table_exists("determinism_probe"):
        return []
    out = []
    for name in (list(models) if models else [None]):
        clause, params = ("", []) if name is None else study_models.model_filter_sql(name)
        probe = wh.query_df(f"SELECT * FROM determinism_probe{' WHERE ' + clause if clause else ''}", params,
                            read_only=True)
        s = summarize_probe(probe)
        if not s.drawn:
            continue
        who = f" [{name}]" if models and len(models) > 1 else ""
        reason = not_run_reason(probe)
        if reason is not None:
            out += ["", f"Live sample{who} (determinism probe): did not run ({reason}); the study's tables and "
                    "report do not depend on it"]
            continue
        failed = f"; {s.errors} request(s) failed, not compared" if s.errors else ""
        out += ["", f"Live sample{who} (determinism probe, cache bypassed): {s.drawn} stored requests re-sent to "
                f"this machine's server; {s.identical} of {s.n} answers byte-identical to the stored ones, "
                f"{s.tests_identical} of {s.n} score the same{failed}"]
    return out


def _any_misleading(wh: Warehouse) -> bool:
    row = wh.query_df("SELECT count(*) AS n FROM test_outcomes WHERE outcome = 'misleading'", read_only=True)
    return bool(int(row["n"][0]))


def language_lines(db: Path, languages: list[str], report: Path) -> list[str]:
    """Each language's cells per condition (the README's Java and JavaScript table) and where the section
    "Languages side by side" is."""
    from evalmislead_assets.report import language_results

    counts = Warehouse(db).query_df(language_results.COUNTS_SQL, read_only=True)
    counts = counts[counts["language"].isin(languages)]
    out = ["", f"Languages side by side (paired intervals: {report}; the README's table: "
               "evalmislead results --languages):"]
    for (model, thinking), rows in counts.groupby(["model_name", "thinking"], sort=True):
        table = language_results.counts_table(rows, languages).drop(columns=["truncated", "both pass"])
        out += ["", f"{model}, thinking {thinking}:", table.to_string(index=False)]
    return out + language_examples(db, [lang for lang in languages if lang != "python"])


# one misleading test per other language (the first by condition, problem and test id): Python's worked
# example is printed above, and a study whose Python run stored none still shows the phenomenon where it occurred
EXAMPLES_SQL = """
SELECT language, model_name, task_id, condition, thinking, test_id, buggy_status, fixed_status, fixed_detail
FROM test_outcomes WHERE outcome = 'misleading' AND list_contains(?, language)
QUALIFY row_number() OVER (PARTITION BY language ORDER BY condition, problem_idx, thinking, model_name, test_id) = 1
ORDER BY list_position(?, language)
"""


def language_examples(db: Path, languages: list[str]) -> list[str]:
    """A misleading test of each of ``languages`` that has one: where it is, its status on both versions and
    the first two lines of the fixed version's failure (the assertion that locks the bug in)."""
    from evalmislead_assets.study.models import LANGUAGE_NAMES

    if not languages:
        return []
    rows = Warehouse(db).query_df(EXAMPLES_SQL, [languages, languages], read_only=True)
    out: list[str] = []
    for r in rows.to_dict("records"):
        failure = " ".join([line.strip() for line in str(r["fixed_detail"] or "").splitlines() if line.strip()][:2])
        out += ["", f"A misleading test in {LANGUAGE_NAMES.get(r['language'], r['language'])}: {r['task_id']}, "
                    f"condition {r['condition']}, thinking {r['thinking']}, model {r['model_name']}, test {r['test_id']}",
                f"  on the buggy version: {r['buggy_status']}; on the fixed version: {r['fixed_status']}"
                + (f" ({failure[:200]})" if failure else "")]
    return out
