"""`evalmislead results`: the generated results sections from the stored rows: the README's first screen
(report/readme_summary.py, its summary markers) and the full Results (report/results.py, docs/results.md).

    evalmislead results                          print the full Results section
    evalmislead results --write README.md        rewrite every generated section whose markers the file holds
    evalmislead results --write docs/results.md  (the same command for the full Results)
    evalmislead results --check FILE             exit 1, with a unified diff, when a section differs from the rows
    evalmislead results --languages ...      the same for the Java and JavaScript screening section
                                             (report/language_results.py, its own markers)
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

DIFF_LINES = 80  # the most diff lines --check prints

HELP = "Render the README's Results section from the stored rows (--write to update it, --check to compare)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default="", help="DuckDB file (default: EVALMISLEAD_DB or the project's)")
    p.add_argument("--pack", default="", help="answer pack whose provenance to show (default: the bundled one, if "
                                             "its answers are what the rows hold)")
    p.add_argument("--languages", action="store_true",
                   help="the Java and JavaScript section (each language's cells, languages side by side) instead")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", default="", metavar="README", help="replace the section between the markers")
    group.add_argument("--check", default="", metavar="README", help="compare the README's section; exit 1 if stale")


def run(args: argparse.Namespace) -> int:
    from evalmislead_assets.analysis.plan import load_plan
    from evalmislead_assets.cli.replay import DEFAULT_PACK
    from evalmislead_assets.llm import answer_pack
    from evalmislead_assets.report import results
    from evalmislead_assets.report.build import load_data
    from evalmislead_assets.store.database import Warehouse

    db = Path(args.db).expanduser() if args.db else settings.db_path()
    if not db.is_file():
        raise ConfigError(f"{db} does not exist; run the study first (bash scripts/run-study.sh)")
    blocks: list[tuple[str, str, list[str], str]] = []  # begin marker, end marker, lines, name
    wh = Warehouse(db)
    if args.languages:
        from evalmislead_assets.report import language_results
        from evalmislead_assets.study.models import LANGUAGE_NAMES

        section = language_results.render(wh.query_df(language_results.COUNTS_SQL),
                                          wh.query_df("SELECT * FROM language_comparisons"), list(LANGUAGE_NAMES))
        blocks.append((language_results.BEGIN, language_results.END, section, "Java and JavaScript"))
    else:
        from evalmislead_assets.report import readme_summary

        data = load_data(wh)
        plan = load_plan(settings.analysis_plan_path())
        pack = Path(args.pack).expanduser() if args.pack else DEFAULT_PACK
        manifest, props = None, None
        try:
            manifest = answer_pack.read_manifest(pack)
            props = answer_pack.read_props(pack) if manifest else None
        except answer_pack.PackError as exc:
            raise ConfigError(str(exc)) from None
        misleading = results.misleading_example(wh.query_df)
        blocks.append((results.BEGIN, results.END, results.render(data, plan, manifest, props, misleading), "Results"))
        blocks.append((readme_summary.BEGIN, readme_summary.END,
                       readme_summary.render(data, plan, readme_summary.short_provenance(manifest), misleading),
                       "summary"))
    flag = " --languages" if args.languages else ""
    target = args.write or args.check
    if not target:
        print("\n".join(blocks[0][2]))
        return 0
    path = Path(target)
    text = path.read_text(encoding="utf-8")
    # each block whose markers the file holds: the README holds the summary, docs/results.md the full Results
    present = [b for b in blocks if b[0] in text and b[1] in text]
    if not present:
        names = " or ".join(f"`{b[0]}`" for b in blocks)
        raise ConfigError(f"{path} has no generated section's markers; add a line {names} and its end marker")
    if args.write:
        for begin, end, section, _ in present:
            text = results.splice(text, section, begin, end)
        path.write_text(text, encoding="utf-8")
        print(f"evalmislead: wrote the {', '.join(b[3] for b in present)} section(s) of {path} from {db}")
        return 0
    stale = []
    for begin, end, section, name in present:
        now, want = results.current(text, begin, end).splitlines(), "\n".join(section).splitlines()
        if now != want:
            stale.append(name)
            diff = list(difflib.unified_diff(now, want, f"{path} ({name})", f"from {db}", lineterm="", n=1))
            print("\n".join(diff[:DIFF_LINES] + ([f"... ({len(diff) - DIFF_LINES} more diff lines)"]
                                               if len(diff) > DIFF_LINES else [])), file=sys.stderr)
    if stale:
        print(f"evalmislead: the {', '.join(stale)} section(s) of {path} differ from what {db} gives now (diff "
              f"above); run evalmislead results{flag} --write {path}", file=sys.stderr)
        return 1
    print(f"evalmislead: the {', '.join(b[3] for b in present)} section(s) of {path} match {db}")
    return 0
