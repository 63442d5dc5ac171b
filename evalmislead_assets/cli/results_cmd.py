"""`evalmislead results`: the README's Results section from the stored rows (report/results.py).

    evalmislead results                      print the section
    evalmislead results --write README.md    put it between the README's Results markers
    evalmislead results --check README.md    exit 1 when the README's section differs from the stored rows
    evalmislead results --languages ...      the same for the Java and JavaScript screening section
                                             (report/language_results.py, its own markers)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

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
    begin, end = results.BEGIN, results.END
    if args.languages:
        from evalmislead_assets.report import language_results
        from evalmislead_assets.study.models import LANGUAGE_NAMES

        wh = Warehouse(db)
        section = language_results.render(wh.query_df(language_results.COUNTS_SQL),
                                          wh.query_df("SELECT * FROM language_comparisons"), list(LANGUAGE_NAMES))
        begin, end = language_results.BEGIN, language_results.END
    else:
        wh = Warehouse(db)
        data = load_data(wh)
        pack = Path(args.pack).expanduser() if args.pack else DEFAULT_PACK
        manifest, props = None, None
        try:
            manifest = answer_pack.read_manifest(pack)
            props = answer_pack.read_props(pack) if manifest else None
        except answer_pack.PackError as exc:
            raise ConfigError(str(exc)) from None
        section = results.render(data, load_plan(settings.analysis_plan_path()), manifest, props,
                                 results.misleading_example(wh.query_df))
    name = "Java and JavaScript" if args.languages else "Results"
    flag = " --languages" if args.languages else ""
    target = args.write or args.check
    if not target:
        print("\n".join(section))
        return 0
    path = Path(target)
    text = path.read_text(encoding="utf-8")
    try:
        if args.write:
            path.write_text(results.splice(text, section, begin, end, name), encoding="utf-8")
            print(f"evalmislead: wrote the {name} section of {path} from {db}")
            return 0
        if results.current(text, begin, end, name) != "\n".join(section):
            print(f"evalmislead: the {name} section of {path} differs from what {db} gives now; run "
                  f"evalmislead results{flag} --write {path}", file=sys.stderr)
            return 1
    except results.ResultsError as exc:
        raise ConfigError(str(exc)) from None
    print(f"evalmislead: the {name} section of {path} matches {db}")
    return 0
