"""Test ids of a generated test module, as pytest names them, collected in the sandbox.

The module is collected against both versions of the code under test (collection runs the
module's top level, which may call the function). A module that cannot be imported or
collected against either version has zero tests and a stored reason, as pytest itself
runs nothing when collection fails. If it collects against one version only, its tests
count and each of them errors against the other version when run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalmislead_assets.sandbox import Collected, Module, Sandbox


@dataclass
class ModuleTests:
    test_ids: list[str]
    import_ok: bool  # collected without error against at least one version
    error: str | None  # why there are no tests, or which version failed to collect

    @property
    def n_tests(self) -> int:
        return len(self.test_ids)


@dataclass(frozen=True)
class CollectRequest:
    source: str
    buggy_code: str
    fixed_code: str


def merge(buggy: Collected, fixed: Collected) -> ModuleTests:
    """Union of the ids found against each version (fixed order first)."""
    if buggy.error and fixed.error:
        reason = fixed.error if buggy.error == fixed.error else f"buggy: {buggy.error}; fixed: {fixed.error}"
        return ModuleTests([], False, reason)
    ids = list(fixed.test_ids) + [t for t in buggy.test_ids if t not in set(fixed.test_ids)]
    error = None
    if buggy.error:
        error = f"buggy: {buggy.error}"
    elif fixed.error:
        error = f"fixed: {fixed.error}"
    elif not ids:
        error = "no tests collected (pytest found no test functions)"
    return ModuleTests(ids, True, error)


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
