"""The package layout's rules (pyproject.toml, [tool.importlinter]) hold: `lint-imports` keeps every contract."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package under ``root``, with its pyproject.toml contracts."""
    lint = Path(sys.executable).parent / "lint-imports"
    cmd = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    return subprocess.run(cmd + ["--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_import_contracts_are_kept():
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_a_domain_module_reading_settings_or_a_group_importing_another_breaks_a_contract(tmp_path):
    """The contracts can fail: a copy of the package with two planted imports is refused, naming both."""
    import shutil

    shutil.copytree(ROOT / "evalmislead_assets", tmp_path / "evalmislead_assets",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for module, line in (("analysis/plan.py", "from evalmislead_assets import settings"),
                         ("assets/models.py", "from evalmislead_assets.assets import analysis")):
        with open(tmp_path / "evalmislead_assets" / module, "a", encoding="utf-8") as fh:
            fh.write(f"\n{line}  # planted\n")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0 and "2 broken" in done.stdout, done.stdout
    assert "evalmislead_assets.analysis.plan -> evalmislead_assets.settings" in done.stdout, done.stdout
    assert "evalmislead_assets.assets.models -> evalmislead_assets.assets.analysis" in done.stdout, done.stdout


def test_no_import_cycle_between_modules():
    """Not even a function-local or type-only one: grimp's graph has no module that reaches itself."""
    import grimp

    graph = grimp.build_graph("evalmislead_assets")
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if module != imported and graph.chain_exists(importer=imported, imported=module):
                cycles.append((module, imported))
    assert not cycles, cycles
