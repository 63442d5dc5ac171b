"""The per-test viewer in a real browser: the index lists the misleading tests, one click opens the answer's
page with the test's status on both versions; the model's text is escaped, never run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

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
    ])
    gt = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "source": "def test_neg(): ...",
         "extraction": "one python fence", "error": None, "verified": False, "unverified_reason": "imports os"},
        {"condition": "fixed_code", "thinking": "off", "task_id": "Python/30", "source": None,
         "extraction": "no code", "error": None},
    ])
    outcomes = pd.DataFrame([
        {"condition": "buggy_code", "thinking": "off", "task_id": "Python/30", "test_id": "test_file.py::test_neg[a<b]",
         "buggy_status": "passed", "fixed_status": "failed", "outcome": "misleading", "buggy_detail": None,
         "fixed_detail": "AssertionError: assert [] == [-1]"},
    ])
    problems = pd.DataFrame([{"task_id": "Python/30", "entry_point": "get_positive",
                              "buggy_code": "def get_positive(l):\n    return [e for e in l if e < 0]\n",
                              "fixed_code": "def get_positive(l):\n    return [e for e in l if e > 0]\n"}])
    return {"test_generations": gens, "generated_tests": gt, "test_outcomes": outcomes, "problems": problems}


def test_pages_escape_the_models_text(tmp_path: Path):
    index = write_viewer(_frames(), tmp_path / "viewer")
    page = (tmp_path / "viewer" / "answers" / "buggy_code-off-30.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "test_neg[a&lt;b]" in page and "AssertionError" in page and "<del>" in page and "<ins>" in page
    fixed = (tmp_path / "viewer" / "fixed_code-off.html").read_text()
    assert "no code in the answer" in fixed  # why that answer has zero tests
    assert "Verified subset: outside (imports os)" in page  # the file's flag beside its source
    assert "Misleading tests (1)" in index.read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_misleading_test_is_one_click_from_the_front_page_in_chromium(tmp_path: Path):
    from playwright.sync_api import sync_playwright

    from evalmislead_tests.e2e.test_ui_browser import CHROMIUM, CHROMIUM_ARGS

    index = write_viewer(_frames(), tmp_path / "viewer")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(index.as_uri())
            page.click("#misleading + table a")
            assert page.url.endswith(".html#" + page.url.split("#")[1]) and "buggy_code-off-30" in page.url
            row = page.locator("tr.misleading")
            assert row.count() == 1
            cells = row.locator("td").all_inner_texts()
            assert cells[1:4] == ["passed", "failed", "misleading"], cells
            assert page.title() != "owned"  # the answer's script was shown, not run
            page.screenshot(path=str(tmp_path / "viewer.png"))
        finally:
            browser.close()
