"""Test ids of a generated test module, as pytest names them, collected in the sandbox.

The module is collected against both versions of the code under test (collection runs the
module's top level, which may call the function). PROTOCOL.md, "Scoring" 2: a test file
that cannot be imported or collected counts as zero tests. That holds per version: a module
that fails to import or collect against EITHER version has zero tests, ``import_ok`` False
and the reason in ``error`` (a file that collects against one version only starts with
``collected against the <version> version only``; see ``is_one_version_error``). Otherwise
its tests would all score ``error`` on the other version and land in a cell by accident of
import, not by what they assert.

The same holds per test id: an id that one version collects and the
other does not (a parametrize value computed from the function under test, a test defined
under an ``if`` on its result) is not a test of the study. Only ids collected against both
versions are scored (``test_ids``, fixed order); the others are kept in ``one_version_ids``
(stored as ``generated_tests.one_version_ids``) and counted in the report, never scored as
``error`` on the version that lacks them. A file whose every id is one-version has zero tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

import pandas as pd

from evalmislead_assets.sandbox.host import Collected, Module, Sandbox


@dataclass
class ModuleTests:
    test_ids: list[str]
    import_ok: bool  # imported and collected without error against both versions
    error: str | None  # why there are no tests
    one_version_ids: list[str] = field(default_factory=list)  # collected against one version only: not scored

    @property
    def n_tests(self) -> int:
        return len(self.test_ids)


@dataclass(frozen=True)
class CollectRequest:
    source: str
    buggy_code: str
    fixed_code: str


ONE_VERSION = "collected against the {ok} version only; {bad}: {error}"
_ONE_VERSION = re.compile(r"^collected against the (buggy|fixed) version only\b")


def stored_test_ids(value: object) -> list[str]:
    """``generated_tests.test_ids`` as stored (a DuckDB ``VARCHAR[]``: a list, a numpy array when read
    through pandas, NULL) -> a list of str. Text (JSON) comes from a DuckDB file in the older format."""
    if isinstance(value, str):
        raise ValueError(
            "generated_tests.test_ids is text in this DuckDB file (written before it became VARCHAR[]): "
            "run `.venv/bin/python -m evalmislead_assets.store.schema --migrate DB_FILE` once")
    if value is None or (not hasattr(value, "__len__") and pd.isna(value)):
        return []
    return [str(t) for t in cast(Iterable[object], value)]


def is_one_version_error(error: object) -> bool:
    """Whether a stored generated_tests.error says the file collected against one version only."""
    return isinstance(error, str) and bool(_ONE_VERSION.match(error))


def merge(buggy: Collected, fixed: Collected) -> ModuleTests:
    """Both versions collected: the ids both collected (fixed order), the rest apart; else zero tests and the reason."""
    if buggy.error and fixed.error:
        reason = fixed.error if buggy.error == fixed.error else f"buggy: {buggy.error}; fixed: {fixed.error}"
        return ModuleTests([], False, reason)
    if buggy.error:
        return ModuleTests([], False, ONE_VERSION.format(ok="fixed", bad="buggy", error=buggy.error))
    if fixed.error:
        return ModuleTests([], False, ONE_VERSION.format(ok="buggy", bad="fixed", error=fixed.error))
    in_buggy, in_fixed = set(buggy.test_ids), set(fixed.test_ids)
    ids = [t for t in fixed.test_ids if t in in_buggy]
    one = [t for t in fixed.test_ids if t not in in_buggy] + [t for t in buggy.test_ids if t not in in_fixed]
    error = None if ids else "no tests collected (pytest found no test functions)"
    if not ids and one:
        error = f"no test id collected against both versions ({len(one)} against one version only)"
    return ModuleTests(ids, True, error, one)


def collect_modules(requests: Sequence[CollectRequest], sandbox: Sandbox | None = None) -> list[ModuleTests]:
    """One ModuleTests per request, in order; an empty source has zero tests without running anything."""
    sandbox = sandbox or Sandbox()
    todo = [i for i, r in enumerate(requests) if r.source.strip()]
    modules: list[Module] = []
    for i in todo:
        modules += [Module(requests[i].buggy_code, requests[i].source), Module(requests[i].fixed_code, requests[i].source)]
    found = sandbox.collect(modules)
    out = [ModuleTests([], False, "no code found in the answer") for _ in requests]
    for k, i in enumerate(todo):
        out[i] = merge(found[2 * k], found[2 * k + 1])
    return out


def collect_module(source: str, buggy_code: str, fixed_code: str, sandbox: Sandbox | None = None) -> ModuleTests:
    return collect_modules([CollectRequest(source, buggy_code, fixed_code)], sandbox)[0]
