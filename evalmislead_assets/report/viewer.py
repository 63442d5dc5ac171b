"""The per-test viewer: static HTML pages, written beside the report, that show one answer at a time.

``viewer/index.html``: the conditions with their cells first, then every test (the misleading ones in a
table of their own), each one click from its answer. ``viewer/<condition>-<thinking>.html``: the problems of
one condition with their function names, test counts and cells, and why a file has zero tests.
``viewer/answers/<condition>-<thinking>-<problem>.html``: the prompt the model was sent, its answer, the
extracted test file (with the extraction's notes), each test with its status on the buggy and on the fixed
version, its cell and its failure messages (each labelled with its version), and the bug's diff.
``viewer/specs.html``: each model-written spec beside the bug's diff with its labels (LLM judge, execution
judge with each example's status on both versions, human review, final).

Everything shown is the model's or the test's own text, so every string is HTML-escaped. Each page carries
one inline script, the same on every page: the filter above its tables (problem, condition, cell, free text),
which reads the rows' ``data-*`` attributes and hides the rows that do not match. It reads and runs nothing
else, and a Content-Security-Policy lets the page run only that script and load nothing from the network;
without script the filter stays hidden and every row shows. The layout fits a 1280 px wide window (long
test ids and lines wrap).
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

CELL_ORDER = ("misleading", "effective", "both_pass", "both_fail")
NO_TESTS = "no_tests"  # a condition page's cell filter value for a problem whose answer has no test
CSS = """*{box-sizing:border-box}body{font-family:system-ui,sans-serif;margin:1em auto;padding:0 1em;max-width:1200px;
color:#222}table{border-collapse:collapse;margin:.5em 0;max-width:100%}td,th{border:1px solid #ccc;
padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:break-word}th{background:#f4f4f4}
pre{background:#f7f7f7;padding:.6em;white-space:pre-wrap;max-width:100%}pre,.w{overflow-wrap:anywhere}
.misleading{background:#fde2e2}.effective{background:#e2f5e2}.both_pass{background:#eef}.both_fail{background:#eee}
.passed{color:#176317;font-weight:600}.failed,.error,.timeout,.crashed,.tampered{color:#a11}.limit{color:#85600a}
del{background:#fdd;text-decoration:none}ins{background:#dfd;text-decoration:none}nav a{margin-right:1em}
tr[hidden],form[hidden]{display:none}form.filter{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;
background:#f4f4f4;padding:.5em .7em;border:1px solid #ccc}form.filter label{white-space:nowrap}
form.filter output{font-style:italic}"""

# The filter: reads the form's fields and each row's data-* attributes, never the page's text, and sets
# row.hidden; the form is hidden in the markup so a browser without script shows every row and no dead box.
# problem: digits match the problem number exactly, anything else a part of "task_id function";
# a select matches one of the row's space-separated values for its name; text: a part of data-text.
SCRIPT = """(function () {
  "use strict";
  var all = function (root, sel) { return Array.prototype.slice.call(root.querySelectorAll(sel)); };
  all(document, "form.filter").forEach(function (form) {
    var rows = all(document, "tr[data-task]");
    var out = form.querySelector("output");
    var field = function (name) {
      var f = form.elements.namedItem(name);
      return f ? f.value.trim().toLowerCase() : "";
    };
    var apply = function () {
      var task = field("task"), text = field("text"), shown = 0;
      var picks = all(form, "select").filter(function (s) { return s.value !== ""; });
      rows.forEach(function (row) {
        var d = row.dataset;
        var named = ((d.task || "") + " " + (d.function || "")).toLowerCase();
        var ok = (!task || (/^[0-9]+$/.test(task) ? d.problem === task : named.indexOf(task) >= 0))
          && (!text || (d.text || "").indexOf(text) >= 0)
          && picks.every(function (s) { return (d[s.name] || "").split(" ").indexOf(s.value) >= 0; });
        row.hidden = !ok;
        if (ok) { shown += 1; }
      });
      out.textContent = shown + " of " + rows.length + " rows shown";
    };
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    form.hidden = false;
    apply();
  });
}());"""
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
# only the filter script above runs, only inline styles apply, nothing is fetched (links still navigate)
CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"


def _text(value: Any) -> str:
    """``value`` as text; "" for a missing one (None, NaN)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value)


def _e(value: Any) -> str:
    return html.escape(_text(value), quote=True)


def _page(title: str, body: list[str], up: str = "") -> str:
    nav = f'<nav><a href="{up}index.html">all conditions</a><a href="{up}../report.html">report</a></nav>'
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{nav}<h1>{_e(title)}</h1>\n"
            + "\n".join(body) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")


Row = Mapping[str, str]  # a filterable row's data-* values (task, problem, function, condition, thinking, cell, text)


def row_data(task: Any, problem: Any, function: Any, text: Iterable[Any] = (), **values: Any) -> dict[str, str]:
    """A table row's data-* values for the filter; ``text`` is what the free-text field searches (lower case)."""
    out = {"task": _text(task), "problem": str(int(problem)) if _text(problem) else "", "function": _text(function)}
    out.update({k: _text(v) for k, v in values.items()})
    out["text"] = " ".join(t for t in map(_text, (task, function, *text)) if t).lower()
    return out


def _attrs(data: Row | None) -> str:
    return "".join(f' data-{k}="{_e(v)}"' for k, v in (data or {}).items())


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], classes: Iterable[str] | None = None,
           data: Sequence[Row] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    cls = list(classes) if classes is not None else None
    out = [f"<table><tr>{head}</tr>"]
    for i, row in enumerate(rows):
        attr = f' class="{_e(cls[i])}"' if cls and cls[i] else ""
        attr += _attrs(data[i] if data else None)
        out.append(f"<tr{attr}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    return "".join(out) + "</table>"


def filter_form(rows: Iterable[Row], cells: Sequence[str] = CELL_ORDER) -> str:
    """The filter box over the page's rows: a problem field where the rows name several problems, a select for
    condition, thinking mode and cell where the rows hold more than one value, and a free-text field."""
    rows = list(rows)
    parts = ['<form class="filter" hidden role="search" aria-label="filter the rows"><b>Filter</b>']
    if len({r.get("task") for r in rows}) > 1:
        parts.append('<label>problem <input type="search" name="task" size="16" '
                     'placeholder="30 or get_positive"></label>')
    for name, order in (("condition", None), ("thinking", None), ("cell", cells)):
        seen = {v for r in rows for v in r.get(name, "").split()}
        values = [v for v in order if v in seen] if order else sorted(seen)
        if len(seen) > 1:
            opts = "".join(f'<option value="{_e(v)}">{_e(v.replace("_", " "))}</option>' for v in values)
            parts.append(f'<label>{name} <select name="{name}"><option value="">any</option>{opts}</select></label>')
    parts.append('<label>text <input type="search" name="text" size="24" placeholder="test name, message"></label>'
                 "<output></output></form>")
    return "".join(parts)


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
    functions = {task: _text(p.get("entry_point")) for task, p in probs.items()}

    cells: dict[tuple[str, str], dict[str, int]] = {}
    listed: list[tuple[dict[str, Any], dict[str, Any]]] = []
    pages = 0
    for g in (gens.sort_values(["thinking", "condition", "problem_idx"]).to_dict("records") if len(gens) else []):
        key = (g["condition"], g["thinking"], g["task_id"])
        idx = int(g["problem_idx"])
        mine = tests.get(key, [])
        c = cells.setdefault((g["condition"], g["thinking"]), {k: 0 for k in ("answers", "tests", *CELL_ORDER)})
        c["answers"] += 1
        c["tests"] += len(mine)
        for t in mine:
            c[t["outcome"]] = c.get(t["outcome"], 0) + 1
            listed.append((g, t))
        (out / answer_name(*key[:2], idx)).write_text(
            _answer_page(g, files.get(key), mine, probs.get(g["task_id"])), encoding="utf-8")
        pages += 1
    for (cond, thinking) in cells:
        rows = [g for g in gens.to_dict("records") if g["condition"] == cond and g["thinking"] == thinking]
        (out / f"{cond}-{thinking}.html").write_text(_condition_page(cond, thinking, rows, files, tests, functions),
                                                    encoding="utf-8")
    labels = frames.get("spec_labels", pd.DataFrame())
    if len(labels):
        specs = frames.get("model_specs", pd.DataFrame())
        texts = {(r["thinking"], r["task_id"]): r.get("spec_text") for r in specs.to_dict("records")} if len(specs) \
            else {}
        (out / SPECS_PAGE).write_text(_specs_page(labels, texts, probs), encoding="utf-8")
    index = out / "index.html"
    index.write_text(_index(cells, listed, pages, functions, specs_page=bool(len(labels))), encoding="utf-8")
    return index


SPECS_PAGE = "specs.html"
SPEC_CATEGORIES = ("transcribes_bug", "restores_correct", "neither", "unlabelled")


def _category(value: Any) -> str:
    return _text(value) or "unlabelled"


def _yes_no(value: Any) -> str:
    text = _text(value)
    return {"True": "yes", "False": "no"}.get(text, text)


def _exec_cell(r: Mapping[str, Any]) -> str:
    """The execution judge's label (or why it gives none) and each example with its status on both versions."""
    if not _text(r.get("exec_n_examples")) and not _text(r.get("exec_note")):
        return "not run"
    head = f"<b>{_e(r.get('exec_category'))}</b>" if _text(r.get("exec_category")) else \
        f"no evidence: {_e(r.get('exec_note'))}"
    try:
        examples = json.loads(_text(r.get("exec_examples")) or "[]")
    except ValueError:
        examples = []
    rows = "".join(f"<li>{_status(x.get('buggy'))} / {_status(x.get('fixed'))} <code>{_e(x.get('example'))}</code></li>"
                   for x in examples if isinstance(x, dict))
    return head + (f"<br>examples (buggy / fixed):<ul>{rows}</ul>" if rows else "")


def _specs_page(labels: pd.DataFrame, texts: Mapping[tuple[str, str], Any], probs: Mapping[str, Any]) -> str:
    """Every model-written spec beside the bug's diff, with the LLM judge's, the execution judge's, the human's
    and the final labels."""
    rows, data, classes = [], [], []
    for r in labels.sort_values(["thinking", "problem_idx"]).to_dict("records"):
        p = probs.get(r["task_id"]) or {}
        llm = "".join(f"{k.replace('_', ' ')}: {_e(_yes_no(r.get('judge_' + k)))}<br>"
                      for k in ("transcribes_bug", "states_correct")) + _e(r.get("judge_error"))
        human = ("".join(f"{k.replace('_', ' ')}: {_e(_yes_no(r.get('human_' + k)))}<br>"
                         for k in ("transcribes_bug", "states_correct")) + _e(r.get("human_note"))) \
            if r.get("in_review_sample") is True or _text(r.get("in_review_sample")) == "True" else "not sampled"
        final = _category(r.get("category"))
        spec = texts.get((r["thinking"], r["task_id"]))
        rows.append([
            f"{_e(r['task_id'])}<br><code>{_e(p.get('entry_point') or r.get('entry_point'))}</code>", _e(r["thinking"]),
            f"<pre>{_e(spec)}</pre>" if _text(spec) else "<i>no spec text</i>",
            bug_diff(p.get("buggy_code", ""), p.get("fixed_code", "")) if p else "",
            llm, _exec_cell(r), human, f"<b>{_e(final)}</b><br>from {_e(r.get('label_source') or 'nobody')}",
        ])
        data.append(row_data(r["task_id"], r.get("problem_idx"), p.get("entry_point") or r.get("entry_point"),
                             text=[spec], thinking=r["thinking"], cell=final))
        classes.append("")
    body = ["<p>Each model-written spec beside the bug's diff. Final label: the human's where given, else the "
            "execution judge's (the spec's own examples run on both versions) where it has evidence, else the LLM "
            "judge's. To review, fill in the human columns of the review CSV that <code>spec_labels</code> writes "
            "(<code>EVALMISLEAD_REVIEW_CSV</code>) and materialize <code>spec_labels</code> again.</p>",
            filter_form(data, cells=SPEC_CATEGORIES),
            _table(["problem", "thinking", "spec", "bug (buggy → fixed)", "LLM judge", "execution judge", "human",
                    "final"], rows, classes, data)]
    return _page("evalmislead: model-written specs and their labels", body, up="")


def _detail_text(t: Mapping[str, Any], limit: int = 2000) -> str:
    """The test's failure messages, each under the version it ran on ("" when neither version left one)."""
    parts = []
    for version in ("buggy", "fixed"):
        detail = t.get(f"{version}_detail")
        if isinstance(detail, str) and detail:
            parts.append(f"{version} version ({_text(t.get(f'{version}_status'))}):\n{detail[:limit]}")
    return "\n\n".join(parts)


def _index(cells: dict[tuple[str, str], dict[str, int]], listed: list[tuple[dict[str, Any], dict[str, Any]]],
           pages: int, functions: Mapping[str, str], specs_page: bool = False) -> str:
    body = [f"<p>{pages} answers, one page each. A test is <b>misleading</b> when it passes on the buggy version "
            "and fails on the fixed one (it locks the bug in), <b>effective</b> when it does the opposite.</p>",
            *([f'<p><a href="{SPECS_PAGE}">The model-written specs and their labels</a> (LLM judge, execution '
               "judge, human review).</p>"] if specs_page else []),
            "<h2 id=\"conditions\">Conditions</h2>",
            _table(["condition", "thinking", "answers", "tests", *(k.replace("_", " ") for k in CELL_ORDER)], [
                [f'<a href="{_e(c)}-{_e(t)}.html">{_e(c)}</a>', _e(t),
                 *(str(v[k]) for k in ("answers", "tests", *CELL_ORDER))]
                for (c, t), v in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0]))])]
    misleading = [(g, t) for g, t in listed if t["outcome"] == "misleading"]
    others = [(g, t) for g, t in listed if t["outcome"] != "misleading"]
    data = [_test_row_data(g, t, functions) for g, t in misleading + others]
    if listed:
        body.append(filter_form(data))
    body.append(f"<h2 id=\"misleading\">Misleading tests ({len(misleading)})</h2>")
    if misleading:
        body.append(_tests_table(misleading, functions, data[:len(misleading)]))
    else:
        body.append("<p>No stored test is misleading.</p>")
    body.append(f"<h2 id=\"tests\">Every other test ({len(others)})</h2>")
    if others:
        body.append(_tests_table(others, functions, data[len(misleading):]))
    return _page("evalmislead: every answer and test", body, up="")


def _test_row_data(g: Mapping[str, Any], t: Mapping[str, Any], functions: Mapping[str, str]) -> dict[str, str]:
    # the free text also searches the first part of each failure message, which the index does not show
    messages = [t.get("buggy_detail"), t.get("fixed_detail")]
    return row_data(g["task_id"], g["problem_idx"], functions.get(g["task_id"]),
                    [t["test_id"], *(_text(m)[:200] for m in messages)],
                    condition=g["condition"], thinking=g["thinking"], cell=t["outcome"])


def _tests_table(pairs: list[tuple[dict[str, Any], dict[str, Any]]], functions: Mapping[str, str],
                 data: Sequence[Row]) -> str:
    return _table(["condition", "thinking", "problem", "function", "test", "buggy version", "fixed version", "cell"], [
        [_e(g["condition"]), _e(g["thinking"]),
         f'<a href="{answer_name(g["condition"], g["thinking"], g["problem_idx"])}">{_e(g["task_id"])}</a>',
         f"<code>{_e(functions.get(g['task_id']))}</code>",
         f'<a class="w" href="{answer_name(g["condition"], g["thinking"], g["problem_idx"])}#{anchor(t["test_id"])}">'
         f'{_e(t["test_id"])}</a>', _status(t["buggy_status"]), _status(t["fixed_status"]),
         _e(str(t["outcome"]).replace("_", " "))]
        for g, t in pairs], classes=[t["outcome"] for _, t in pairs], data=data)


def _condition_page(cond: str, thinking: str, rows: list[dict[str, Any]], files: dict, tests: dict,
                    functions: Mapping[str, str]) -> str:
    table, data = [], []
    for g in sorted(rows, key=lambda r: int(r["problem_idx"])):
        key = (cond, thinking, g["task_id"])
        mine = tests.get(key, [])
        f = files.get(key) or {}
        why = "" if mine else _why_zero(f, g)
        counts = {k: sum(1 for t in mine if t["outcome"] == k) for k in CELL_ORDER}
        table.append([f'<a href="{answer_name(cond, thinking, g["problem_idx"])}">{_e(g["task_id"])}</a>',
                      f"<code>{_e(functions.get(g['task_id']))}</code>", _e(g.get("finish_reason")), str(len(mine)),
                      *(str(counts[k]) for k in CELL_ORDER), f'<span class="w">{_e(why)}</span>'])
        data.append(row_data(g["task_id"], g["problem_idx"], functions.get(g["task_id"]),
                             [g.get("finish_reason"), why, *(t["test_id"] for t in mine)],
                             cell=" ".join([k for k in CELL_ORDER if counts[k]] or [NO_TESTS])))
    body = [filter_form(data, cells=(*CELL_ORDER, NO_TESTS)) if data else "",
            _table(["problem", "function", "finish", "tests", *(k.replace("_", " ") for k in CELL_ORDER),
                    "why zero tests"], table, data=data)]
    return _page(f"{cond} | thinking {thinking}", body, up="")


def _answer_page(g: dict[str, Any], f: dict[str, Any] | None, tests: list[dict[str, Any]],
                 p: dict[str, Any] | None) -> str:
    f = f or {}
    function = _text((p or {}).get("entry_point"))
    body = [f"<p>Function <code>{_e(function)}</code>, condition <b>{_e(g['condition'])}</b>, thinking "
            f"{_e(g['thinking'])}, finish <code>{_e(g.get('finish_reason'))}</code>, "
            f"{_e(g.get('completion_tokens'))} tokens.</p>"]
    if p is not None:
        body += ["<h2>The bug (buggy → fixed)</h2>", bug_diff(p.get("buggy_code", ""), p.get("fixed_code", ""))]
    body.append(f"<h2>Tests ({len(tests)})</h2>")
    if tests:
        data = [row_data(g["task_id"], g["problem_idx"], function,
                         [t["test_id"], t.get("buggy_detail"), t.get("fixed_detail")], cell=t["outcome"])
                for t in tests]
        if len(tests) > 1:
            body.append(filter_form(data))
        body.append(_table(["test", "buggy version", "fixed version", "cell", "messages"], [
            [f'<span class="w" id="{anchor(t["test_id"])}">{_e(t["test_id"])}</span>', _status(t["buggy_status"]),
             _status(t["fixed_status"]), _e(str(t["outcome"]).replace("_", " ")),
             f"<pre>{_e(_detail_text(t))}</pre>" if _detail_text(t) else ""]
            for t in tests], classes=[t["outcome"] for t in tests], data=data))
    else:
        body.append(f"<p>Zero tests: {_e(_why_zero(f, g))}</p>")
    body += [f"<h2>Extracted test file</h2><p>{_e(f.get('extraction'))}</p><p>{_e(_verified_note(f))}</p>"
             f"<pre>{_e(f.get('source'))}</pre>",
             f"<h2>Answer</h2><pre>{_e(g.get('response_text'))}</pre>",
             f"<h2>Prompt</h2><pre>{_e(_prompt(g.get('request_json')))}</pre>"]
    title = f"{g['task_id']} {function}: {g['condition']} | {g['thinking']}" if function else \
        f"{g['task_id']}: {g['condition']} | {g['thinking']}"
    return _page(title, body, up="../")


def _verified_note(f: dict[str, Any]) -> str:
    """Whether the runner vouches for this file's verdicts (docs/verified-subset.md)."""
    v = f.get("verified")
    if v is None or (isinstance(v, float) and v != v):
        return "Verified subset: not checked."
    if bool(v):
        return "Verified subset: inside (its verdicts are what its assertions produced)."
    return f"Verified subset: outside ({f.get('unverified_reason')}); scored all the same, shown apart in the report."
