"""The per-test viewer: static HTML pages, written beside the report, that show one answer at a time.

``viewer/index.html``: the conditions with their cells, and every misleading test one click away.
``viewer/<condition>-<thinking>.html``: the problems of one condition, their test counts and cells, and why a
file has zero tests. ``viewer/answers/<condition>-<thinking>-<problem>.html``: the prompt the model was sent,
its answer, the extracted test file (with the extraction's notes), each test with its status on the buggy
and on the fixed version, its cell and failure messages, and the bug's diff.

Everything shown is the model's or the test's own text, so every string is HTML-escaped; the pages load no
script and nothing from the network.
"""

from __future__ import annotations

import difflib
import hashlib
import html
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

CELL_ORDER = ("misleading", "effective", "both_pass", "both_fail")
CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:75em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;
vertical-align:top}th{background:#f4f4f4}pre{background:#f7f7f7;padding:.6em;overflow-x:auto;white-space:pre-wrap}
.misleading{background:#fde2e2}.effective{background:#e2f5e2}.both_pass{background:#eef}.both_fail{background:#eee}
.passed{color:#176317;font-weight:600}.failed,.error,.timeout,.crashed,.tampered{color:#a11}.limit{color:#85600a}
del{background:#fdd;text-decoration:none}ins{background:#dfd;text-decoration:none}nav a{margin-right:1em}"""


def _e(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return html.escape(str(value), quote=True)


def _page(title: str, body: list[str], up: str = "") -> str:
    nav = f'<nav><a href="{up}index.html">all conditions</a><a href="{up}../report.html">report</a></nav>'
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{nav}<h1>{_e(title)}</h1>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], classes: Iterable[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    cls = list(classes) if classes is not None else None
    out = [f"<table><tr>{head}</tr>"]
    for i, row in enumerate(rows):
        attr = f' class="{_e(cls[i])}"' if cls and cls[i] else ""
        out.append(f"<tr{attr}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    return "".join(out) + "</table>"


def anchor(test_id: Any) -> str:
    """A test's anchor on its answer page (test ids hold brackets, spaces and quotes)."""
    return "t" + hashlib.sha1(str(test_id).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def answer_name(condition: str, thinking: str, problem_idx: int) -> str:
    return f"answers/{condition}-{thinking}-{int(problem_idx)}.html"


def _prompt(request_json: Any) -> str:
    try:
        messages = json.loads(request_json).get("messages") or []
    except (TypeError, ValueError):
        return ""
    return "\n\n".join(str(m.get("content", "")) for m in messages)


def bug_diff(buggy: str, fixed: str) -> str:
    lines = difflib.unified_diff(str(buggy).splitlines(), str(fixed).splitlines(), "buggy", "fixed", lineterm="")
    out = []
    for line in lines:
        if line.startswith("-") and not line.startswith("---"):
            out.append(f"<del>{_e(line)}</del>")
        elif line.startswith("+") and not line.startswith("+++"):
            out.append(f"<ins>{_e(line)}</ins>")
        else:
            out.append(_e(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def _why_zero(f: dict[str, Any], g: dict[str, Any]) -> str:
    """Why an answer has no test: the file's error, the answer's error, no code, or nothing collected."""
    for value in (f.get("error"), g.get("error")):
        if isinstance(value, str) and value:
            return value
    source = f.get("source")
    return "no code in the answer" if not isinstance(source, str) or not source.strip() else "no test collected"


def _status(s: Any) -> str:
    kind = str(s).split(":", 1)[0]  # limit:output, limit:memory... share the class "limit"
    return f'<span class="{_e(kind)}">{_e(s)}</span>'


def write_viewer(frames: dict[str, pd.DataFrame], out_dir: Path) -> Path:
    """Write the pages under ``out_dir`` (the report folder's viewer/); returns the index page."""
    out = Path(out_dir)
    (out / "answers").mkdir(parents=True, exist_ok=True)
    gens = frames.get("test_generations", pd.DataFrame())
    gt = frames.get("generated_tests", pd.DataFrame())
    outcomes = frames.get("test_outcomes", pd.DataFrame())
    problems = frames.get("problems", pd.DataFrame())
    probs = {r["task_id"]: r for r in problems.to_dict("records")} if len(problems) else {}
    files = {(r["condition"], r["thinking"], r["task_id"]): r for r in gt.to_dict("records")} if len(gt) else {}
    tests: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in (outcomes.to_dict("records") if len(outcomes) else []):
        tests.setdefault((r["condition"], r["thinking"], r["task_id"]), []).append(r)

    cells: dict[tuple[str, str], dict[str, int]] = {}
    misleading_rows, pages = [], 0
    for g in (gens.sort_values(["thinking", "condition", "problem_idx"]).to_dict("records") if len(gens) else []):
        key = (g["condition"], g["thinking"], g["task_id"])
        idx = int(g["problem_idx"])
        mine = tests.get(key, [])
        c = cells.setdefault((g["condition"], g["thinking"]), {k: 0 for k in ("answers", "tests", *CELL_ORDER)})
        c["answers"] += 1
        c["tests"] += len(mine)
        for t in mine:
            c[t["outcome"]] = c.get(t["outcome"], 0) + 1
            if t["outcome"] == "misleading":
                misleading_rows.append((g, t))
        (out / answer_name(*key[:2], idx)).write_text(
            _answer_page(g, files.get(key), mine, probs.get(g["task_id"])), encoding="utf-8")
        pages += 1
    for (cond, thinking) in cells:
        rows = [g for g in gens.to_dict("records") if g["condition"] == cond and g["thinking"] == thinking]
        (out / f"{cond}-{thinking}.html").write_text(_condition_page(cond, thinking, rows, files, tests),
                                                    encoding="utf-8")
    index = out / "index.html"
    index.write_text(_index(cells, misleading_rows, pages), encoding="utf-8")
    return index


def _index(cells: dict[tuple[str, str], dict[str, int]], misleading: list, pages: int) -> str:
    body = [f"<p>{pages} answers, one page each. A test is <b>misleading</b> when it passes on the buggy version "
            "and fails on the fixed one (it locks the bug in), <b>effective</b> when it does the opposite.</p>",
            f"<h2 id=\"misleading\">Misleading tests ({len(misleading)})</h2>"]
    if misleading:
        body.append(_table(["condition", "thinking", "problem", "test"], [
            [_e(g["condition"]), _e(g["thinking"]), _e(g["task_id"]),
             f'<a href="{answer_name(g["condition"], g["thinking"], g["problem_idx"])}#{anchor(t["test_id"])}">'
             f'{_e(t["test_id"])}</a>']
            for g, t in misleading]))
    else:
        body.append("<p>No stored test is misleading.</p>")
    body.append("<h2>Conditions</h2>")
    body.append(_table(["condition", "thinking", "answers", "tests", *CELL_ORDER], [
        [f'<a href="{_e(c)}-{_e(t)}.html">{_e(c)}</a>', _e(t), *(str(v[k]) for k in ("answers", "tests", *CELL_ORDER))]
        for (c, t), v in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0]))]))
    return _page("evalmislead: every answer and test", body, up="")


def _condition_page(cond: str, thinking: str, rows: list[dict[str, Any]], files: dict, tests: dict) -> str:
    table = []
    for g in sorted(rows, key=lambda r: int(r["problem_idx"])):
        key = (cond, thinking, g["task_id"])
        mine = tests.get(key, [])
        f = files.get(key) or {}
        why = "" if mine else _e(_why_zero(f, g))
        counts = {k: sum(1 for t in mine if t["outcome"] == k) for k in CELL_ORDER}
        table.append([f'<a href="{answer_name(cond, thinking, g["problem_idx"])}">{_e(g["task_id"])}</a>',
                      _e(g.get("finish_reason")), str(len(mine)), *(str(counts[k]) for k in CELL_ORDER), why])
    body = [_table(["problem", "finish", "tests", *CELL_ORDER, "why zero tests"], table)]
    return _page(f"{cond} | thinking {thinking}", body, up="")


def _answer_page(g: dict[str, Any], f: dict[str, Any] | None, tests: list[dict[str, Any]],
                 p: dict[str, Any] | None) -> str:
    f = f or {}
    body = [f"<p>Condition <b>{_e(g['condition'])}</b>, thinking {_e(g['thinking'])}, finish "
            f"<code>{_e(g.get('finish_reason'))}</code>, {_e(g.get('completion_tokens'))} tokens.</p>"]
    if p is not None:
        body += ["<h2>The bug (buggy → fixed)</h2>", bug_diff(p.get("buggy_code", ""), p.get("fixed_code", ""))]
    body.append(f"<h2>Tests ({len(tests)})</h2>")
    if tests:
        body.append(_table(["test", "buggy version", "fixed version", "cell", "details"], [
            [f'<span id="{anchor(t["test_id"])}">{_e(t["test_id"])}</span>', _status(t["buggy_status"]),
             _status(t["fixed_status"]),
             _e(t["outcome"]), "<pre>" + _e("\n".join(x for x in (t.get("buggy_detail"), t.get("fixed_detail"))
                                                     if isinstance(x, str) and x)[:4000]) + "</pre>"]
            for t in tests], classes=[t["outcome"] for t in tests]))
    else:
        body.append(f"<p>Zero tests: {_e(_why_zero(f, g))}</p>")
    body += [f"<h2>Extracted test file</h2><p>{_e(f.get('extraction'))}</p><p>{_e(_verified_note(f))}</p>"
             f"<pre>{_e(f.get('source'))}</pre>",
             f"<h2>Answer</h2><pre>{_e(g.get('response_text'))}</pre>",
             f"<h2>Prompt</h2><pre>{_e(_prompt(g.get('request_json')))}</pre>"]
    return _page(f"{g['task_id']}: {g['condition']} | {g['thinking']}", body, up="../")


def _verified_note(f: dict[str, Any]) -> str:
    """Whether the runner vouches for this file's verdicts (docs/verified-subset.md)."""
    v = f.get("verified")
    if v is None or (isinstance(v, float) and v != v):
        return "Verified subset: not checked."
    if bool(v):
        return "Verified subset: inside (its verdicts are what its assertions produced)."
    return f"Verified subset: outside ({f.get('unverified_reason')}); scored all the same, shown apart in the report."
