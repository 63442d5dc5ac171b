"""Honest test files are scored exactly as plain pytest scores them.

Every file of evalmislead_tests/sandbox/honest/ runs through the runner (static scan on, as in the
study) and through plain ``python -m pytest FILE::ID ...`` in a subprocess, against the buggy and the
fixed version of a real problem (Python/30, get_positive); each test id's status must agree. The
corpus holds what a third adversarial pass found mis-scored (failing subtests scored ``passed``;
``from solution import *``, ``hasattr(x, "__iter__")``, ``self.config``/``self.session``,
``traceback.print_exc()``, ``pytest.main()`` under the ``__main__`` guard scored ``tampered``) and the
common kinds of honest test (parametrize, fixtures, classes, unittest.TestCase, raises, approx, a helper).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalmislead_assets.execution.cells import outcome
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_tests import sandbox_honest_corpus as corpus

TASK = "Python/30"


@pytest.fixture(scope="module")
def scored(problems_df: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """file -> version -> {"runner": {id: status}, "plain": {id: status}, "detail": {id: detail}}, one batch."""
    problem = problems_df.set_index("task_id").loc[TASK]
    versions = {"buggy": problem.buggy_code, "fixed": problem.fixed_code}
    sources = {name: (corpus.HONEST / name).read_text() for name in corpus.FILES}
    box = Sandbox(Limits(timeout_s=20.0), workers=2)
    keys = [(name, v) for name in corpus.FILES for v in versions]
    modules = [Module(versions[v], sources[name]) for name, v in keys]
    collected = box.collect(modules)
    requests = [(m, t) for m, c in zip(modules, collected) for t in c.test_ids]
    ran = iter(box.run(requests))
    base: Path = tmp_path_factory.mktemp("plain-pytest")
    out: dict[str, Any] = {name: {} for name in corpus.FILES}
    for (name, v), c in zip(keys, collected):
        assert c.error is None, f"{name} against the {v} version: {c.error}"
        results = [next(ran) for _ in c.test_ids]
        folder = corpus.write_version(base / name.removesuffix(".py") / v, versions[v], sources[name])
        out[name][v] = {"runner": {t: r.status for t, r in zip(c.test_ids, results)},
                        "detail": {t: r.detail for t, r in zip(c.test_ids, results)},
                        "plain": corpus.plain_pytest_statuses(folder, c.test_ids)}
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", corpus.FILES)
def test_the_runner_scores_each_honest_file_as_plain_pytest(scored: dict[str, Any], name: str) -> None:
    for version, got in scored[name].items():
        differ = {t: (s, got["plain"][t], got["detail"][t][:200]) for t, s in got["runner"].items()
                  if s != got["plain"][t]}
        assert differ == {}, f"{name} against the {version} version: runner, plain pytest, detail: {differ}"
        assert list(got["runner"]) == list(got["plain"]) and got["runner"]


@pytest.mark.slow
def test_the_corpus_separates_the_versions_and_fails_on_both(scored: dict[str, Any]) -> None:
    """Not vacuous: every file has a test whose cell depends on the version, and the subtest files a
    test wrong on both versions, which must land in both_fail, not both_pass."""
    for name, by_version in scored.items():
        b, f = by_version["buggy"]["runner"], by_version["fixed"]["runner"]
        cells = {t: outcome(b[t], f[t]) for t in b}
        assert {"misleading", "effective"} & set(cells.values()), (name, cells)
        assert "tampered" not in set(b.values()) | set(f.values()), name
    for name, test_id in (("subtests_unittest.py", "TestSubTests::test_wrong_on_both"),
                          ("subtests_fixture.py", "test_wrong_on_both")):
        b, f = scored[name]["buggy"], scored[name]["fixed"]
        assert (b["runner"][test_id], f["runner"][test_id]) == ("failed", "failed")
        assert f["detail"][test_id].startswith("contains 1 failed subtest: ")
    detail = scored["subtests_unittest.py"]["buggy"]["detail"]["TestSubTests::test_keeps_positives"]
    assert detail.startswith("contains 3 failed subtests: (x=1) AssertionError: Lists differ"), detail
