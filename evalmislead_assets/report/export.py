"""Reproduction package: plan + change log, prompts, generated tests, per-test results, labels, manifest.

Layout of the package folder::

    README.md              what the package holds and how to check it (`evalmislead verify <package>`)
    manifest.json          what is in it: every file with bytes and sha256, table row counts, plan hash, and
                           where it was made (git commit and dirty flag, models and their sha256, llama.cpp
                           build, Python); every path in it is relative to the package
    SHA256SUMS             the same hashes, checkable with `sha256sum -c SHA256SUMS`
    environment/requirements.lock   the installed distributions (name==version, as `pip freeze` lists them)
    plan/                  analysis_plan.json and analysis_plan_changes.md
    prompts/               every file of the prompts folder used
    tables/<name>.parquet  (or .jsonl) one file per stored table
    generated_tests/<thinking>/<condition>/<task>.py   each extracted test module
    report/                the study report when one has been written
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from evalmislead_assets.analysis.plan import load_plan
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.report.package_readme import package_readme
from evalmislead_assets.report.provenance import llama_cpp
from evalmislead_assets.store.hashing import sha256_file
from evalmislead_assets.store.schema import TABLES as SCHEMA_TABLES

# Tables exported: every table of the schema registry, in its order; llm_cache (raw response bodies) is
# optional (--with-cache).
OPTIONAL_TABLES = ("llm_cache",)
TABLES = [name for name in SCHEMA_TABLES if name not in OPTIONAL_TABLES]
FORMATS = ("parquet", "jsonl")


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    manifest: dict
    archive: Path | None


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def export_package(
    db: Path, out: Path, *, plan_path: Path, review_csvs: Mapping[str, Path] | None = None, fmt: str = "parquet",
    with_cache: bool = False, archive: bool = False, report_folder: Path | None = None,
    provenance: Mapping[str, Any] | None = None, environment: list[str] | None = None,
) -> ExportResult:
    """Write the package into ``out`` (created; must be empty or absent).

    ``plan_path``: the analysis plan (copied with the prompts beside it); ``review_csvs``: the spec-label
    review files, package path under review/ -> file (one per model of the study), each copied when it
    exists (the CLI passes the settings' paths). ``provenance``: where the package was made (git state,
    models, Python; report/provenance.py), merged into the manifest, plus the llama.cpp build the stored
    /props documents report; ``environment``: the lines of environment/requirements.lock.
    """
    from evalmislead_assets.store.database import Warehouse

    if fmt not in FORMATS:
        raise ConfigError(f"export format {fmt!r} is not one of {', '.join(FORMATS)}")
    db = Path(db)
    if not db.is_file():
        raise ConfigError(f"no DuckDB file at {db}; run the study first or set EVALMISLEAD_DB")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"export folder {out} is not empty; choose another with --out")
    plan = load_plan(plan_path)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "plan").mkdir()
    shutil.copy2(plan.path, out / "plan" / plan.path.name)
    changes = plan.path.parent / plan.data.get("changes", "analysis_plan_changes.md")
    if changes.is_file():
        shutil.copy2(changes, out / "plan" / changes.name)
    prompts_dir = plan.path.parent
    shutil.copytree(prompts_dir, out / "prompts", ignore=shutil.ignore_patterns("__pycache__", ".*"))

    rows: dict[str, int] = {}
    wanted = TABLES + (["llm_cache"] if with_cache else [])
    with Warehouse(db).connect(read_only=True) as con:  # waits out a writer's lock
        have = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        for table in wanted:
            if table not in have:
                continue
            target = out / "tables" / f"{table}.{fmt}"
            options = "FORMAT parquet, COMPRESSION zstd" if fmt == "parquet" else "FORMAT json"
            quoted = target.as_posix().replace("'", "''")
            con.execute(f"COPY (SELECT * FROM {table}) TO '{quoted}' ({options})")
            rows[table] = int(con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])
        reported = [r[0] for r in con.execute(
            "SELECT DISTINCT json_extract_string(props_json, '$.build_info') FROM server_props "
            "WHERE props_json IS NOT NULL").fetchall() if r[0]] if "server_props" in have else []
        n_modules = 0
        if "generated_tests" in have:
            for cond, thinking, task, source in con.execute(
                "SELECT condition, thinking, task_id, source FROM generated_tests WHERE source IS NOT NULL "
                "AND source <> '' ORDER BY thinking, condition, problem_idx"
            ).fetchall():
                path = out / "generated_tests" / _safe(thinking) / _safe(cond) / f"{_safe(task)}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(source, encoding="utf-8")
                n_modules += 1
    for name, review in sorted((review_csvs or {}).items()):
        if Path(review).is_file():
            (out / "review" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(review, out / "review" / name)
    if report_folder and Path(report_folder).is_dir() and any(Path(report_folder).iterdir()):
        shutil.copytree(report_folder, out / "report")

    if environment is not None:
        (out / "environment").mkdir()
        (out / "environment" / "requirements.lock").write_text("".join(f"{ln}\n" for ln in environment),
                                                              encoding="utf-8")
    made = dict(provenance or {})
    made["llama_cpp"] = llama_cpp(made.pop("llama_server_binary", None), reported)
    (out / "README.md").write_text(package_readme(out.name, rows, made, fmt), encoding="utf-8")

    files = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = path.relative_to(out).as_posix()
        files.append({"path": rel, "bytes": path.stat().st_size, "sha256": sha256_file(path)})
    try:
        version = metadata.version("evalmislead")
    except metadata.PackageNotFoundError:
        version = "unknown"
    manifest = {
        "name": "evalmislead reproduction package",
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "evalmislead_version": version, "source_db": db.name, "format": fmt,
        "plan_version": plan.version, "plan_sha256": plan.sha256,
        "tables": rows, "generated_test_modules": n_modules, **made, "files": files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    sums = "".join(f"{f['sha256']}  {f['path']}\n" for f in files)
    (out / "SHA256SUMS").write_text(sums, encoding="utf-8")
    zip_path = None
    if archive:
        zip_path = Path(shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name))
    return ExportResult(out, manifest, zip_path)


def verify(folder: Path) -> list[str]:
    """Files whose sha256 no longer matches the manifest (empty list: intact)."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    bad = []
    for f in manifest["files"]:
        p = folder / f["path"]
        if not p.is_file() or sha256_file(p) != f["sha256"]:
            bad.append(f["path"])
    return bad
