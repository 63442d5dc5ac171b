"""`evalmislead verify <package>`: re-check a reproduction package without a GPU or a model.

Three checks: every file's sha256 against manifest.json; the package's consistency (every stored test's cell
and every derived table recomputed from the package's own rows, report/package_consistency.py); then a seeded
sample of the stored tests (tables/test_outcomes) re-run against the buggy and the fixed version of their
problem (tables/problems) in the project's sandbox, exactly as the study ran them (execution.cells.score_many
on the module stored in tables/generated_tests), each status compared with the stored one. A damaged file
stops the check before consistency, a disagreement before the re-score.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from evalmislead_assets.errors import ConfigError
from evalmislead_assets.report.package_consistency import Consistency, check_package
from evalmislead_assets.store.hashing import sha256_file

#: the columns that name one answer's test module (model_name only in a study of several models)
MODULE_KEY = ("condition", "thinking", "task_id")


@dataclass
class Rescored:
    where: str  # "model/condition|thinking task_id::test_id"
    stored: tuple[str, str]  # (buggy, fixed) as stored
    now: tuple[str, str]  # (buggy, fixed) re-run here

    @property
    def agrees(self) -> bool:
        return self.stored == self.now


@dataclass
class Verification:
    files: int = 0
    bad_files: list[str] = field(default_factory=list)  # missing or changed
    consistency: Consistency | None = None  # None: not checked (a damaged file)
    rescored: list[Rescored] = field(default_factory=list)
    population: int = 0  # stored tests the sample was drawn from

    @property
    def ok(self) -> bool:
        return (not self.bad_files and self.consistency is not None and self.consistency.ok
                and all(r.agrees for r in self.rescored))


def check_sums(folder: Path) -> tuple[int, list[str]]:
    """(files listed, those missing or whose sha256 differs from manifest.json)."""
    manifest = read_manifest(folder)
    bad = [f["path"] for f in manifest["files"]
           if not (folder / f["path"]).is_file() or sha256_file(folder / f["path"]) != f["sha256"]]
    return len(manifest["files"]), bad


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"{folder} has no manifest.json; point verify at the folder `evalmislead export` wrote")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON ({exc}); the package is damaged, export it again") from None


def _table(folder: Path, name: str, fmt: str) -> str:
    path = folder / "tables" / f"{name}.{fmt}"
    if not path.is_file():
        raise ConfigError(f"{path} is missing; the package cannot be re-scored without it (export it again)")
    reader = "read_parquet" if fmt == "parquet" else "read_json_auto"
    return f"{reader}('{path.as_posix().replace(chr(39), chr(39) * 2)}')"


def sample_tests(folder: Path, n: int, seed: int) -> tuple[list[dict[str, Any]], int]:
    """(``n`` stored tests drawn with ``seed``, with their module and problem; how many there were)."""
    fmt = read_manifest(folder).get("format", "parquet")
    con = duckdb.connect()
    try:
        outcomes = _table(folder, "test_outcomes", fmt)
        cols = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {outcomes}").fetchall()}
        key = [*MODULE_KEY, *(["model_name"] if "model_name" in cols else [])]
        on = " AND ".join(f"o.{k} IS NOT DISTINCT FROM g.{k}" for k in key)
        # the re-score runs the Python sandbox: Java and JavaScript tests are not drawn
        python_only = "WHERE coalesce(o.language, 'python') = 'python' " if "language" in cols else ""
        cur = con.execute(
            f"SELECT {', '.join(f'o.{k}' for k in key)}, o.test_id, o.buggy_status, o.fixed_status, g.source, "
            f"p.buggy_code, p.fixed_code FROM {outcomes} o JOIN {_table(folder, 'generated_tests', fmt)} g ON {on} "
            f"JOIN {_table(folder, 'problems', fmt)} p ON p.task_id = o.task_id {python_only}"
            f"ORDER BY {', '.join(f'o.{k}' for k in key)}, o.test_id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()
    picked = random.Random(seed).sample(rows, min(n, len(rows))) if n > 0 else []
    return picked, len(rows)


def rescore(rows: list[dict[str, Any]], score: Callable[[list[tuple[str, list[str], str, str]]], list[list[Any]]]
            ) -> list[Rescored]:
    """Re-run ``rows`` (one batch, a job per module); ``score`` is execution.cells.score_many on a sandbox."""
    modules: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        modules.setdefault((r.get("model_name"), r["condition"], r["thinking"], r["task_id"]), []).append(r)
    jobs = [(tests[0]["source"], [t["test_id"] for t in tests], tests[0]["buggy_code"], tests[0]["fixed_code"])
            for tests in modules.values()]
    out: list[Rescored] = []
    for tests, scored in zip(modules.values(), score(jobs)):
        by_id = {s.test_id: s for s in scored}
        for t in tests:
            s = by_id.get(t["test_id"])
            now = (s.buggy_status, s.fixed_status) if s is not None else ("not run", "not run")
            model = f"{t['model_name']}/" if t.get("model_name") else ""
            out.append(Rescored(f"{model}{t['condition']}|{t['thinking']} {t['task_id']}::{t['test_id']}",
                                (t["buggy_status"], t["fixed_status"]), now))
    return out


def verify_package(folder: Path, sample: int, seed: int,
                   score: Callable[[list[tuple[str, list[str], str, str]]], list[list[Any]]] | None = None
                   ) -> Verification:
    """The sums, the consistency, then ``sample`` stored tests re-scored (none when ``sample`` is 0, a file is
    damaged or a table disagrees with its recomputation)."""
    folder = Path(folder)
    result = Verification()
    result.files, result.bad_files = check_sums(folder)
    if result.bad_files:
        return result
    result.consistency = check_package(folder, read_manifest(folder).get("format", "parquet"))
    if sample > 0 and result.consistency.ok:
        rows, result.population = sample_tests(folder, sample, seed)
        if score is None:
            from evalmislead_assets.execution.cells import score_many

            score = score_many
        result.rescored = rescore(rows, score) if rows else []
    return result
