"""`evalmislead export`: the reproduction package (plan, prompts, generated tests, results, labels)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from evalmislead_assets import settings, study_models

HELP = "Export the reproduction package: plan + change log, prompts, generated tests, per-test results, labels, manifest."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="", help="package folder (default: <data>/export/evalmislead-<UTC time>, "
                                             "or under EVALMISLEAD_EXPORT_DIR)")
    p.add_argument("--format", choices=["parquet", "jsonl"], default="parquet", help="table file format")
    p.add_argument("--with-cache", action="store_true", help="also export llm_cache (raw response bodies)")
    p.add_argument("--zip", action="store_true", help="also write <folder>.zip")
    p.add_argument("--db", default="", help="DuckDB file (default: EVALMISLEAD_DB or the project's)")


def run(args: argparse.Namespace) -> int:
    from evalmislead_assets.report import export

    db = Path(args.db).expanduser() if args.db else settings.db_path()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out).expanduser() if args.out else settings.export_dir() / f"evalmislead-{stamp}"
    review = settings.review_csv_path()
    study = study_models.study()
    # spec_labels writes one review CSV per model of the study (assets/analysis.review_csv)
    files = [study.model_path(review, m) for m in study.models]
    reviews = {f.relative_to(review.parent).as_posix(): f for f in files}
    result = export.export_package(db, out, plan_path=settings.analysis_plan_path(), review_csvs=reviews,
                                   fmt=args.format, with_cache=args.with_cache, archive=args.zip,
                                   report_folder=settings.report_dir())
    m = result.manifest
    tables = ", ".join(f"{k} {v}" for k, v in m["tables"].items())
    print(f"evalmislead: exported {len(m['files'])} files ({tables}; {m['generated_test_modules']} test modules) "
          f"under plan {m['plan_sha256'][:12]}")
    print(f"evalmislead: package {result.folder}" + (f" and {result.archive}" if result.archive else ""))
    print(f"evalmislead: check it with: cd {result.folder} && sha256sum -c SHA256SUMS")
    return 0
