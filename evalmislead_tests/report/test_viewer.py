"""The per-test viewer: the index lists the conditions first, then every test with its function, each one click
from its answer's page with the test's status and messages on both versions; a filter box (problem, condition,
cell, free text) hides and shows rows from their data-* attributes; the model's text is escaped, never run; the
pages fit a 1280 px wide window."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from evalmislead_assets.report import viewer
from evalmislead_assets.report.viewer import write_viewer

ANSWER = "```python\nfrom solution import get_positive\n\ndef test_neg():\n    assert get_positive([-1]) == [-1]\n```\n" \
         "<script>document.title='owned'</script>"


def _frames() -> dict[str, pd.DataFrame]:
    gens = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "problem_idx": 30, "error": None,
         "finish_reason": "stop", "completion_tokens": 40, "response_text": ANSWER,
         "request_json": json.dumps({"messages": [{"role": "user", "content": "Write tests for get_positive"}]})},
        {"condition": "fixed_code", "thinking": "off", "task_id": "Python/30", "problem_idx": 30, "error": None,
         "finish_reason": "length", "completion_tokens": 768, "response_text": "Here is how I would test it",
         "request_json": json.dumps({"messages": [{"role": "user", "content": "x"}]})},
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/2", "problem_idx": 2, "error": None,
         "finish_reason": "stop", "completion_tokens": 90, "response_text": "z" * 5000,  # one unbroken line
         "request_json": json.dumps({"messages": [{"role": "user", "content": "Write tests for truncate_number"}]})},
    ])
    gt = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "source": "def test_neg(): ...",
         "extraction": "one python fence", "error": None, "verified": False, "unverified_reason": "imports os"},
        {"condition": "fixed_code", "thinking": "off", "task_id": "Python/30", "source": None,
         "extraction": "no code", "error": None},
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/2", "source": "def test_x(): ...",
         "extraction": "one python fence", "error": None, "verified": True},
    ])
    outcomes = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "test_id": "test_file.py::test_neg[a<b]",
         "buggy_status": "passed", "fixed_status": "failed", "outcome": "misleading", "buggy_detail": None,
         "fixed_detail": "AssertionError: assert [] == [-1]"},
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30",
         "test_id": 'test_file.py::test_both["x" & \'y\']', "buggy_status": "failed", "fixed_status": "error",
         "outcome": "both_fail", "buggy_detail": "AssertionError: assert 1 == 2",
         "fixed_detail": "NameError: name 'get_positiv' is not defined"},
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/2", "test_id": "test_file.py::test_" + "x" * 300,
         "buggy_status": "failed", "fixed_status": "passed", "outcome": "effective",
         "buggy_detail": "AssertionError: " + "y" * 3000, "fixed_detail": None},
    ])
    problems = pd.DataFrame([{"task_id": "Python/30", "entry_point": "get_positive",
                              "buggy_code": "def get_positive(l):\n    return [e for e in l if e < 0]\n",
                              "fixed_code": "def get_positive(l):\n    return [e for e in l if e > 0]\n"},
                             {"task_id": "Python/2", "entry_point": "truncate_number",
                              "buggy_code": "def truncate_number(n):\n    return n % 1.0 + 1.0\n",
                              "fixed_code": "def truncate_number(n):\n    return n % 1.0\n"}])
    return {"test_generations": gens, "generated_tests": gt, "test_outcomes": outcomes, "problems": problems}


def test_pages_escape_the_models_text(tmp_path: Path):
    index = write_viewer(_frames(), tmp_path / "viewer")
    page = (tmp_path / "viewer" / "answers" / "buggy_code-off-30.html").read_text()
    assert "<script>document" not in page and "&lt;script&gt;" in page
    assert "test_neg[a&lt;b]" in page and "AssertionError" in page and "<del>" in page and "<ins>" in page
    fixed = (tmp_path / "viewer" / "fixed_code-off.html").read_text()
    assert "no code in the answer" in fixed  # why that answer has zero tests
    assert "Verified subset: outside (imports os)" in page  # the file's flag beside its source
    assert "Misleading tests (1)" in index.read_text() and "Every other test (2)" in index.read_text()


def _rows(page: str) -> list[dict[str, str]]:
    """The data-* attributes of each filterable row, unescaped as a browser reads them."""
    import html

    return [{k: html.unescape(v) for k, v in re.findall(r' data-([a-z]+)="([^"]*)"', tr)}
            for tr in re.findall(r"<tr[^>]* data-task=[^>]*>", page)]


def test_every_page_has_one_filter_over_rows_that_carry_their_values(tmp_path: Path):
    index = write_viewer(_frames(), tmp_path / "viewer").read_text()
    # the conditions first, then the filter, then the tests (misleading ones apart)
    assert index.index("<h2 id=\"conditions\">") < index.index('<form class="filter"') < index.index('id="misleading"')
    assert re.search(r'<select name="cell"><option value="">any</option><option value="misleading">misleading</option>'
                     r'<option value="effective">effective</option><option value="both_fail">both fail</option>', index)
    assert '<input type="search" name="task"' in index and '<input type="search" name="text"' in index
    rows = _rows(index)
    assert [(r["task"], r["problem"], r["function"], r["condition"], r["cell"]) for r in rows] == [
        ("Python/30", "30", "get_positive", "buggy_code", "misleading"),
        ("Python/2", "2", "truncate_number", "buggy_code", "effective"),
        ("Python/30", "30", "get_positive", "buggy_code", "both_fail"),
    ]
    # the free text holds the test id and the start of its messages, in lower case
    assert 'test_file.py::test_both["x" & \'y\']' in rows[2]["text"] and "nameerror" in rows[2]["text"]
    # the quotes of a test id are escaped inside the attribute: no attribute ends early
    assert 'data-text="python/30 get_positive test_file.py::test_both[&quot;x&quot; &amp; &#x27;y&#x27;]' in index
    assert "<code>get_positive</code>" in index  # the function beside the problem

    condition = (tmp_path / "viewer" / "buggy_code-off.html").read_text()
    cond_rows = _rows(condition)
    assert [(r["task"], r["function"], r["cell"]) for r in cond_rows] == [
        ("Python/2", "truncate_number", "effective"), ("Python/30", "get_positive", "misleading both_fail")]
    assert '<select name="condition">' not in condition  # one condition on the page: nothing to choose
    fixed = _rows((tmp_path / "viewer" / "fixed_code-off.html").read_text())
    assert fixed[0]["cell"] == "no_tests"

    answer = (tmp_path / "viewer" / "answers" / "buggy_code-off-30.html").read_text()
    assert "<h1>Python/30 get_positive: buggy_code | off</h1>" in answer
    assert '<select name="cell">' in answer and '<input type="search" name="task"' not in answer  # one problem
    # every page: the same one script, admitted by the page's Content-Security-Policy and nothing else
    for page in (index, condition, answer):
        assert re.findall(r"<script>(.*?)</script>", page, re.S) == [viewer.SCRIPT]
        digest = base64.b64encode(hashlib.sha256(viewer.SCRIPT.encode()).digest()).decode()
        assert f"script-src 'sha256-{digest}'" in page and "default-src 'none'" in page


def test_the_filter_script_reads_data_attributes_and_reaches_nothing():
    script = viewer.SCRIPT
    assert "dataset" in script and "row.hidden" in script
    for word in ("eval(", "Function(", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "fetch(",
                 "XMLHttpRequest", "import(", "src=", "setTimeout(\"", "textContent.indexOf"):
        assert word not in script, word


def test_each_message_is_labelled_with_its_version(tmp_path: Path):
    write_viewer(_frames(), tmp_path / "viewer")
    page = (tmp_path / "viewer" / "answers" / "buggy_code-off-30.html").read_text()
    assert "buggy version (failed):\nAssertionError: assert 1 == 2\n\nfixed version (error):\nNameError" in page
    assert "fixed version (failed):\nAssertionError: assert [] == [-1]" in page
    # a message is cut at 2000 characters, its version label kept
    long = (tmp_path / "viewer" / "answers" / "buggy_code-off-2.html").read_text()
    assert "buggy version (failed):\nAssertionError: " + "y" * 1984 + "</pre>" in long


def test_a_planted_unescaped_value_would_be_seen(tmp_path: Path):
    """The attribute check above reads what a browser reads: a raw quote in a value splits the attribute."""
    planted = '<tr data-task="Python/1" data-text="a"b">'
    assert _rows(planted)[0]["text"] == "a"


def _chromium():
    from evalmislead_tests.e2e.test_ui_browser import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"{CHROMIUM} is missing: bash scripts/bootstrap.sh --browser installs it")
    return CHROMIUM, CHROMIUM_ARGS


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_misleading_test_is_one_click_from_the_front_page_in_chromium(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    chromium, args = _chromium()
    index = write_viewer(_frames(), tmp_path / "viewer")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(index.as_uri())
            page.click("#misleading + table a[href*='#']")
            assert page.url.endswith(".html#" + page.url.split("#")[1]) and "buggy_code-off-30" in page.url
            row = page.locator("tr.misleading")
            assert row.count() == 1
            cells = row.locator("td").all_inner_texts()
            assert cells[1:4] == ["passed", "failed", "misleading"], cells
            assert page.title() != "owned"  # the answer's script was shown, not run
            page.screenshot(path=str(tmp_path / "viewer.png"))
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_filter_hides_and_shows_rows_in_chromium(tmp_path: Path):
    from playwright.sync_api import expect, sync_playwright

    chromium, args = _chromium()
    index = write_viewer(_frames(), tmp_path / "viewer")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(index.as_uri())
            rows = page.locator("tr[data-task]")
            visible = page.locator("tr[data-task]:visible")
            form = page.locator("form.filter")
            expect(form).to_be_visible()  # the script ran under the page's policy and showed the box
            expect(form.locator("output")).to_have_text("3 of 3 rows shown")

            form.locator("input[name=task]").type("truncate")  # a part of the function name
            expect(visible).to_have_count(1)
            assert visible.first.get_attribute("data-task") == "Python/2"
            form.locator("input[name=task]").fill("30")  # a problem number matches exactly
            expect(visible).to_have_count(2)
            form.locator("input[name=task]").fill("3")
            expect(visible).to_have_count(0)
            expect(form.locator("output")).to_have_text("0 of 3 rows shown")
            form.locator("input[name=task]").fill("")
            expect(visible).to_have_count(3)

            form.locator("select[name=cell]").select_option("both_fail")
            expect(visible).to_have_count(1)
            form.locator("select[name=cell]").select_option("")
            form.locator("input[name=text]").type("NameError")  # in a message the index does not show
            expect(visible).to_have_count(1)
            assert "test_both" in visible.first.inner_text()
            form.locator("input[name=text]").press("Enter")  # the form never submits
            assert page.url == index.as_uri()
            assert rows.count() == 3
            page.screenshot(path=str(tmp_path / "filter.png"))

            # a condition page: a problem's row holds every cell its tests landed in
            page.goto((tmp_path / "viewer" / "buggy_code-off.html").as_uri())
            page.locator("form.filter select[name=cell]").select_option("both_fail")
            expect(visible).to_have_count(1)
            assert visible.first.get_attribute("data-task") == "Python/30"

            # every page fits a 1280 px window: long test ids, messages and unbroken answers wrap
            for html_file in (index, tmp_path / "viewer" / "buggy_code-off.html",
                              tmp_path / "viewer" / "answers" / "buggy_code-off-2.html"):
                page.goto(html_file.as_uri())
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= 1280, (html_file.name, width)
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_pages_policy_runs_the_filter_and_no_other_script_in_chromium(tmp_path: Path):
    """A script the viewer did not write (here planted by hand) does not run under the page's policy."""
    from playwright.sync_api import sync_playwright

    chromium, args = _chromium()
    index = write_viewer(_frames(), tmp_path / "viewer")
    planted = tmp_path / "viewer" / "planted.html"
    planted.write_text(index.read_text().replace("</h1>", "</h1><script>document.title='ran'</script>", 1))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=args)
        try:
            page = browser.new_page()
            page.goto(planted.as_uri())
            assert page.title() == "evalmislead: every answer and test"
            assert page.locator("form.filter").is_visible()  # the filter script did run
            # the same page without its policy runs the planted script: the check above can fail
            bare = tmp_path / "viewer" / "bare.html"
            bare.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", planted.read_text()))
            page.goto(bare.as_uri())
            assert page.title() == "ran"
        finally:
            browser.close()


def test_specs_page_shows_each_spec_beside_the_diff_with_both_judges_and_the_human(tmp_path: Path):
    frames = _frames()
    frames["model_specs"] = pd.DataFrame([
        {"thinking": "off", "task_id": "Python/30", "spec_text": "Returns the negatives.\n- get_positive([1]) -> []"},
        {"thinking": "off", "task_id": "Python/2", "spec_text": "<b>Rounds</b> the number."},
    ])
    frames["spec_labels"] = pd.DataFrame([
        {"thinking": "off", "task_id": "Python/30", "problem_idx": 30, "entry_point": "get_positive",
         "judge_transcribes_bug": False, "judge_states_correct": True, "judge_error": None,
         "in_review_sample": True, "human_transcribes_bug": True, "human_states_correct": False,
         "human_note": "says negatives", "category": "transcribes_bug", "label_source": "human",
         "exec_category": "transcribes_bug", "exec_note": None, "exec_n_examples": 1,
         "exec_examples": json.dumps([{"example": "- get_positive([1]) -> []", "buggy": "passed", "fixed": "failed"}])},
        {"thinking": "off", "task_id": "Python/2", "problem_idx": 2, "entry_point": "truncate_number",
         "judge_transcribes_bug": False, "judge_states_correct": True, "judge_error": None,
         "in_review_sample": False, "human_transcribes_bug": None, "human_states_correct": None, "human_note": None,
         "category": "restores_correct", "label_source": "judge", "exec_category": None,
         "exec_note": "no example the extractor can read", "exec_n_examples": 0, "exec_examples": "[]"},
    ])
    index = write_viewer(frames, tmp_path / "viewer").read_text()
    assert 'href="specs.html"' in index
    page = (tmp_path / "viewer" / "specs.html").read_text()
    assert "<b>Rounds</b>" not in page and "&lt;b&gt;Rounds&lt;/b&gt;" in page  # the model's text is escaped
    assert page.count("<del>") == 2 and page.count("<ins>") == 2  # each spec beside its bug's diff
    assert 'class="passed">passed</span> / <span class="failed">failed</span>' in page
    assert "no evidence: no example the extractor can read" in page and "says negatives" in page
    assert "not sampled" in page and "EVALMISLEAD_REVIEW_CSV" in page
    assert [(r["task"], r["cell"]) for r in _rows(page)] == [("Python/2", "restores_correct"),
                                                             ("Python/30", "transcribes_bug")]
    # without stored labels there is no page and no link
    del frames["spec_labels"]
    assert 'href="specs.html"' not in write_viewer(frames, tmp_path / "v2").read_text()
    assert not (tmp_path / "v2" / "specs.html").exists()
