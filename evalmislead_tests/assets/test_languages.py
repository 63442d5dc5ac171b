"""A study of Python, JavaScript and Java through real Dagster runs against a fake server.

The fake server answers each prompt as its language asks (a pytest, node:test or JUnit 5 file) with one test
that asserts the bug (misleading) and one that asserts the fix (effective); the real extraction, runners and
oracles score them. Checked: every row lands with its language, the keys carry the language prefix, the
language_comparisons table pairs the languages on problem_idx, and the report section sets them side by side.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from evalmislead_assets import study_models
from evalmislead_assets.partitions import partition_key
from evalmislead_assets.resources import LLMResource, StudySettingsResource, WarehouseIOManager, WarehouseResource
from evalmislead_assets.store.database import Warehouse
from evalmislead_tests.fake_llm_server import FakeLLMServer

PROBLEMS = [23, 30]
JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")

# (misleading, effective) assertion per language and problem: the buggy strlen returns len - 1, the buggy
# get_positive keeps the negative numbers
_PY = {"strlen": ("strlen('abc') == 2", "strlen('abc') == 3"),
       "get_positive": ("get_positive([1, -2]) == [-2]", "get_positive([1, -2]) == [1]")}
_JS = {"strlen": ("assert.strictEqual(strlen('abc'), 2)", "assert.strictEqual(strlen('abc'), 3)"),
       "getPositive": ("assert.deepStrictEqual(getPositive([1, -2]), [-2])",
                       "assert.deepStrictEqual(getPositive([1, -2]), [1])")}
_JAVA = {"strlen": ('assertEquals(2, new Solution().strlen("abc"))',
                   'assertEquals(3, new Solution().strlen("abc"))'),
         "getPositive": ("assertEquals(List.of(-2), new Solution().getPositive(Arrays.asList(1, -2)))",
                         "assertEquals(List.of(1), new Solution().getPositive(Arrays.asList(1, -2)))")}


def answer_for(prompt: str) -> str:
    """A test file in the prompt's language for the prompt's function; a spec request gets a doc comment."""
    if "test" not in prompt.lower() or "docstring" in prompt.lower() or "doc comment" in prompt.lower():
        return "/** Returns something. */"
    if "```java\n" in prompt:
        name = "strlen" if "strlen" in prompt else "getPositive"
        bad, good = _JAVA[name]
        return ("```java\nimport java.util.*;\nimport org.junit.jupiter.api.Test;\n"
                "import static org.junit.jupiter.api.Assertions.*;\n\npublic class SolutionTest {\n"
                f"    @Test\n    void keepsTheBug() {{ {bad}; }}\n\n"
                f"    @Test\n    void catchesTheBug() {{ {good}; }}\n}}\n```\n")
    if "```javascript\n" in prompt:
        name = "strlen" if "strlen" in prompt else "getPositive"
        bad, good = _JS[name]
        return ("```javascript\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
                f"const {{ {name} }} = require('./solution.js');\n\n"
                f"test('keeps the bug', () => {{ {bad}; }});\ntest('catches the bug', () => {{ {good}; }});\n```\n")
    name = "strlen" if "strlen" in prompt else "get_positive"
    bad, good = _PY[name]
    return (f"```python\nfrom solution import {name}\n\n\ndef test_keeps_the_bug():\n    assert {bad}\n\n\n"
            f"def test_catches_the_bug():\n    assert {good}\n```\n")


def _defs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, languages: str):
    study = tmp_path / "study.toml"
    study.write_text(f'languages = {languages}\n[[models]]\nname = "coder"\nbundled = "qwen2.5-coder-0.5b"\n')
    monkeypatch.setenv("EVALMISLEAD_STUDY", str(study))
    monkeypatch.delenv("EVALMISLEAD_MODELS", raising=False)
    study_models.reset()
    from evalmislead_assets.definitions import build

    return build(study_models.study())


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(not (shutil.which("node") and shutil.which("javac") and JUNIT.is_file()),
                    reason="node, a JDK and junit5 are needed (scripts/bootstrap.sh installs them)")
def test_python_js_and_java_side_by_side_in_real_dagster_runs(seeded_warehouse: Warehouse, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", ",".join(map(str, PROBLEMS)))
    try:
        defs = _defs(tmp_path, monkeypatch, '["python", "js", "java"]')
        graph = defs.resolve_asset_graph()
        keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
        assert {"test_outcomes", "js/test_outcomes", "java/test_outcomes", "js/problems", "java/problem_validation",
                "language_comparisons", "languages_report"} <= keys
        assets = list(defs.assets or [])
        with FakeLLMServer() as fake:
            fake.answer_for = answer_for
            resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                         "study_settings": StudySettingsResource(),
                         "llm": LLMResource(urls=fake.url, retries=1, backoff_s=0.2),
                         "judge_llm": LLMResource(urls=fake.url)}

            versioned: set[str] = set()

            def run(selection: list[str], key=None) -> None:
                result = materialize(assets, selection=[AssetKey.from_user_string(s) for s in selection],
                                     partition_key=key, resources=resources, instance=DagsterInstance.ephemeral())
                assert result.success
                # every language's answers carry the data version of the answers themselves (Python's rule), so
                # the UI marks what was built from changed answers stale in Java and JavaScript too
                for event in result.get_asset_materialization_events():
                    m = event.step_materialization_data.materialization
                    if (m.tags or {}).get("dagster/data_version_is_user_provided") == "true":
                        versioned.add(m.asset_key.to_user_string())

            run(["js/problems", "js/problem_validation", "java/problems", "java/problem_validation"])
            for condition in ("buggy_code", "fixed_code"):
                run([f"{p}{a}" for p in ("", "js/", "java/")
                     for a in ("test_generations", "generated_tests", "test_outcomes")],
                    partition_key(condition, "off"))
            run(["language_comparisons", "languages_report"])
            assert fake.chat_requests == 2 * 3 * len(PROBLEMS)
            assert versioned == {"test_generations", "js/test_generations", "java/test_generations"}

        # the problems of each language in the same tables, with their language
        langs = wh.query_df("SELECT language, count(*) AS n FROM problems GROUP BY ALL ORDER BY language")
        assert dict(zip(langs["language"], langs["n"])) == {"java": 164, "js": 164, "python": 164}
        valid = wh.query_df("SELECT language, task_id FROM problem_validation WHERE language <> 'python' AND valid "
                            "ORDER BY language, task_id")
        assert valid["task_id"].tolist() == ["Java/23", "Java/30", "JavaScript/23", "JavaScript/30"]
        # every answer and outcome row names its language; each test in the expected cell, in every language
        gens = wh.query_df("SELECT language, task_id FROM test_generations ORDER BY ALL")
        assert {(lang, t.split("/")[0]) for lang, t in zip(gens["language"], gens["task_id"])} == {
            ("python", "Python"), ("js", "JavaScript"), ("java", "Java")}
        out = wh.query_df("SELECT language, condition, outcome, count(*) AS n FROM test_outcomes GROUP BY ALL")
        cells = {(r.language, r.condition, r.outcome): r.n for r in out.itertuples()}
        for lang in ("python", "js", "java"):
            for condition in ("buggy_code", "fixed_code"):
                assert cells.get((lang, condition, "misleading")) == 2, (lang, condition, cells)
                assert cells.get((lang, condition, "effective")) == 2, (lang, condition, cells)
        # the languages side by side: same model, paired on problem_idx, same rates -> a difference of 0
        cmp = wh.query_df("SELECT * FROM language_comparisons WHERE metric = 'misleading_rate' "
                          "ORDER BY language_a, language_b, condition")
        assert set(zip(cmp["language_a"], cmp["language_b"])) == {("python", "js"), ("python", "java"),
                                                                  ("js", "java")}
        assert (cmp["n_problems"] == 2).all() and (cmp["rate_a"] == 0.5).all() and (cmp["estimate"] == 0).all()
        assert cmp["estimable"].all() and not cmp["excludes_zero"].any()
        coverage = wh.query_df("SELECT note FROM language_comparisons WHERE metric = 'line_coverage'")
        assert len(coverage) and coverage["note"].str.startswith("not estimable for").all()
        assert not wh.query_df("SELECT 1 FROM language_comparisons WHERE metric = 'line_coverage' "
                               "AND estimate IS NOT NULL").shape[0]
        report = (tmp_path / "home" / "report" / "languages.md").read_text()
        assert "# Languages side by side" in report and "Python − JavaScript" in report and "Java" in report
    finally:
        study_models.reset()


# the answer the grammar makes the real model write: one test that asserts the bug of JavaScript/30
_JS_ANSWER = ("```javascript\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
              "const { getPositive } = require('./solution.js');\n\n"
              "test('keeps the bug', () => { assert.deepStrictEqual(getPositive([1, -2]), [-2]); });\n```")
_JS_GRAMMAR = 'root ::= "' + _JS_ANSWER.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not shutil.which("node"), reason="node is needed (scripts/bootstrap.sh installs it)")
def test_one_javascript_problem_through_the_real_llama_server(seeded_warehouse: Warehouse, llama_server: str,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JavaScript/30 through the bundled llama-server (SmolLM2, its answer shaped by a GBNF grammar so that a
    135M model writes a test): the JS prompt is sent, the answer stored with language js, extracted, collected
    and run by the node:test runner, and its one test lands in the misleading cell."""
    wh = seeded_warehouse
    monkeypatch.setenv("EVALMISLEAD_PROBLEMS", "30")
    try:
        defs = _defs(tmp_path, monkeypatch, '["python", "js"]')
        assets = list(defs.assets or [])
        resources = {"warehouse": WarehouseResource(), "io_manager": WarehouseIOManager(),
                     "study_settings": StudySettingsResource(),
                     "llm": LLMResource(urls=llama_server), "judge_llm": LLMResource(urls=llama_server)}
        for selection, key, config in (
                (["js/problems", "js/problem_validation"], None, {}),
                (["js/test_generations", "js/generated_tests", "js/test_outcomes"], partition_key("buggy_code", "off"),
                 {"ops": {"js__test_generations": {"config": {"grammar": _JS_GRAMMAR, "max_tokens": 200}}}})):
            result = materialize(assets, selection=[AssetKey.from_user_string(s) for s in selection],
                                 partition_key=key, resources=resources, run_config=config,
                                 instance=DagsterInstance.ephemeral())
            assert result.success
        gen = wh.query_df("SELECT language, task_id, response_text, request_json FROM test_generations")
        assert gen[["language", "task_id"]].values.tolist() == [["js", "JavaScript/30"]]
        assert "```javascript" in gen["request_json"][0] and "getPositive" in gen["response_text"][0]
        out = wh.query_df("SELECT language, test_id, buggy_status, fixed_status, outcome FROM test_outcomes")
        assert out.values.tolist() == [["js", "keeps the bug", "passed", "failed", "misleading"]]
    finally:
        study_models.reset()
