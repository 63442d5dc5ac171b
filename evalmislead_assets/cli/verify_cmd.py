"""`evalmislead verify <package>`: re-check a reproduction package's sums, recompute its derived tables from its
own rows, and re-score a sample of its tests.

No GPU, no model, no DuckDB file: the package alone (see report/package_verify.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evalmislead_assets.errors import ConfigError

if TYPE_CHECKING:  # the CLI imports every command's module: the analysis stack loads only when verify runs
    from evalmislead_assets.report.package_consistency import Consistency

HELP = ("verify a reproduction package: every file's sha256, every derived table recomputed from the package's "
        "stored outcomes, then a seeded sample of its stored tests re-run against both versions and compared "
        "with the stored statuses (no GPU or model needed)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("package", help="the package folder `evalmislead export` wrote")
    p.add_argument("--sample", type=int, default=20, metavar="N",
                   help="stored tests to re-run (default 20; 0: check the sums and the consistency only)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="parallel sandboxes (default: CPUs)")


def run(args: argparse.Namespace) -> int:
    from evalmislead_assets.execution.cells import score_many
    from evalmislead_assets.report.package_verify import verify_package
    from evalmislead_assets.sandbox.host import Sandbox, SandboxUnavailable

    folder = Path(args.package).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"no package folder at {folder}; pass the folder `evalmislead export` wrote")
    if args.sample < 0 or (args.workers is not None and args.workers < 1):
        raise ConfigError("--sample must be 0 or more and --workers at least 1")
    sandbox = Sandbox(workers=args.workers)
    try:
        result = verify_package(folder, args.sample, args.seed, lambda jobs: score_many(jobs, sandbox))
    except SandboxUnavailable as exc:  # the machine, not the package: one line
        raise ConfigError(str(exc)) from None
    if result.bad_files:
        shown = ", ".join(result.bad_files[:5]) + (f" and {len(result.bad_files) - 5} more"
                                                   if len(result.bad_files) > 5 else "")
        print(f"evalmislead: {len(result.bad_files)} of {result.files} files missing or changed since export: "
              f"{shown}; nothing re-scored")
        return 1
    print(f"evalmislead: sums: {result.files} files match manifest.json")
    consistency = result.consistency
    if consistency is not None and consistency.first is not None:
        print(f"evalmislead: consistency: {consistency.first.line()}"
              + ("; nothing re-scored" if args.sample else ""))
        return 1
    if consistency is not None:
        print(f"evalmislead: consistency: {consistency_line(consistency)}")
    if args.sample == 0:
        return 0
    if not result.rescored:
        print("evalmislead: re-score: the package holds no stored test")
        return 0
    differ = [r for r in result.rescored if not r.agrees]
    print(f"evalmislead: re-score: {len(result.rescored) - len(differ)} of {len(result.rescored)} sampled tests "
          f"(seed {args.seed}, of {result.population} stored) give the stored statuses on both versions")
    for r in differ:
        print(f"  differs: {r.where}: stored buggy {r.stored[0]}, fixed {r.stored[1]}; "
              f"now buggy {r.now[0]}, fixed {r.now[1]}")
    return 0 if not differ else 1


def consistency_line(c: Consistency) -> str:
    """What agreed: the tests whose cell was recomputed, the derived tables and their rows, those not stored."""
    tables = {k: v for k, v in c.rows.items() if k != "test_outcomes"}
    line = (f"{c.rows.get('test_outcomes', 0)} stored tests give their cells; {len(tables)} derived tables "
            f"({sum(tables.values())} rows) match their recomputation from the package's own rows")
    return line + (f" (none stored: {', '.join(c.not_stored)})" if c.not_stored else "")
