"""`evalmislead results`: the generated results sections from the stored rows: the README's first screen
(report/readme_summary.py, its summary markers) and the full Results (report/results.py, docs/results.md).

    evalmislead results                          print the full Results section
    evalmislead results --write README.md        rewrite every generated section whose markers the file holds
    evalmislead results --write docs/results.md  (the same command for the full Results)
    evalmislead results --check FILE             exit 1, with a unified diff, when a section differs from the rows
    evalmislead results --write FILE --partial   write a partial run's figures, labelled as that partial run
    evalmislead results --languages ...      the same for the Java and JavaScript screening section
                                             (report/language_results.py, its own markers)

The data is opened read-only (no schema update, no lock beyond DuckDB's shared read): `--check` leaves the
DuckDB file's bytes as they are and runs beside a run that holds the data folder. `--check` compares the
parts of the Results the stored run has (a run without `--mutation` has no mutation rows: that part is
skipped, and one line says so). `--write` refuses a run with fewer problems or conditions than the full
study the text describes (the answer pack's recorded run, or the protocol's six conditions on 164 problems)
unless `--partial` asks for it written under a header line naming what it covers; rows of another run
(cells the recorded run does not have, or answered by a request it does not hold) are refused either way.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

if TYPE_CHECKING:  # imported where used: every `evalmislead` command loads this module
    from evalmislead_assets.report.run_scope import RunScope
    from evalmislead_assets.store.database import Warehouse

DIFF_LINES = 80  # the most diff lines --check prints
WHOLE = "*"  # Block.skip key: the whole block is not compared

HELP = "Render the README's Results section from the stored rows (--write to update it, --check to compare)."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default="", help="DuckDB file (default: EVALMISLEAD_DB or the project's)")
    p.add_argument("--pack", default="", help="answer pack whose provenance to show and whose recorded run the "
                                             "rows must cover (default: the bundled one)")
    p.add_argument("--languages", action="store_true",
                   help="the Java and JavaScript section (each language's cells, languages side by side) instead")
    p.add_argument("--partial", action="store_true",
                   help="with --write: write a run with fewer problems or conditions than the full study, "
                        "under a header line naming the problems and conditions it covers")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", default="", metavar="README", help="replace the section between the markers")
    group.add_argument("--check", default="", metavar="README", help="compare the README's section; exit 1 if stale")


@dataclass
class Block:
    begin: str
    end: str
    lines: list[str]
    name: str
    command: str  # the command that writes it
    skip: dict[str, str] = field(default_factory=dict)  # parts of the block not compared -> why


def run(args: argparse.Namespace) -> int:
    import duckdb

    from evalmislead_assets.report import results
    from evalmislead_assets.store.database import Warehouse

    db = Path(args.db).expanduser() if args.db else settings.db_path()
    if not db.is_file():
        raise ConfigError(f"{db} does not exist; run the study first (bash scripts/run-study.sh)")
    if args.partial and not args.write:
        raise ConfigError("--partial goes with --write FILE (a check or a print labels a partial run by itself)")
    wh = Warehouse(db, read_only=True)  # nothing here writes: the file's bytes stay as they are
    target = args.write or args.check
    path = Path(target) if target else None
    text = path.read_text(encoding="utf-8") if path else ""
    if path is not None:
        markers = _markers(args.languages)
        if not any(begin in text and end in text for begin, end in markers):
            names = " or ".join(f"`{begin}`" for begin, _ in markers)
            raise ConfigError(f"{path} has no generated section's markers; add a line {names} and its end marker")
    other: dict[str, tuple[str, str]] = {}
    scope: RunScope | None = None
    try:
        if args.languages:
            blocks = _language_blocks(wh)
        else:  # a partial run is refused before anything is rendered
            blocks, other, scope = _results_blocks(wh, args, path if args.write else None)
    except duckdb.CatalogException as exc:  # read-only: a table the file lacks is not created here
        raise ConfigError(f"{db} lacks a table this version reads ({str(exc).splitlines()[0]}); bring its schema "
                          "up to date with any run of this version (e.g. `evalmislead run`), then retry") from None
    if path is None:
        print("\n".join(blocks[0].lines))
        return 0
    # each block whose markers the file holds: the README holds the summary, docs/results.md the full Results
    present = [b for b in blocks if b.begin in text and b.end in text]
    if args.write:
        for b in present:
            text = results.splice(text, b.lines, b.begin, b.end)
        path.write_text(text, encoding="utf-8")
        print(f"evalmislead: wrote the {', '.join(b.name for b in present)} section(s) of {path} from {db}"
              + (f" (partial run: {scope.covers_line()})" if scope is not None and scope.partial else ""))
        return 0
    return _check(path, text, present, other, scope, db)


def _markers(languages: bool) -> list[tuple[str, str]]:
    from evalmislead_assets.report import language_results, readme_summary, results

    if languages:
        return [(language_results.BEGIN, language_results.END)]
    return [(results.BEGIN, results.END), (readme_summary.BEGIN, readme_summary.END)]


def _results_blocks(wh: Warehouse, args: argparse.Namespace, write_to: Path | None
                    ) -> tuple[list[Block], dict[str, tuple[str, str]], RunScope]:
    """The Results and the README summary from the stored rows; the other blocks a file may hold that are not
    compared here (begin marker -> name, why); the stored run's scope against the full study. ``write_to``:
    the file to be written, refused (``_refuse_partial``) before anything is rendered."""
    from evalmislead_assets.analysis.plan import load_plan
    from evalmislead_assets.cli.replay import DEFAULT_PACK
    from evalmislead_assets.llm import answer_pack
    from evalmislead_assets.report import language_results, readme_summary, results, run_scope
    from evalmislead_assets.report.build import load_data

    pack = Path(args.pack).expanduser() if args.pack else DEFAULT_PACK
    manifest, props, answers = None, None, []
    try:
        manifest = answer_pack.read_manifest(pack)
        if manifest:
            props = answer_pack.read_props(pack)
            answers = answer_pack.read_pack(pack, check_model=False).labelled() if manifest.get("shards") else []
    except answer_pack.PackError as exc:
        raise ConfigError(str(exc)) from None
    full: frozenset[tuple[str, int]] | dict[tuple[str, int], str] = run_scope.recorded_cells(answers)
    if full:
        name = f"the recorded run of {manifest.get('model') if manifest else 'the pack'} ({len(full)} test generations)"
    else:
        full, name = run_scope.design_cells(), run_scope.DESIGN_NAME
    stored = wh.query_df(run_scope.STORED_SQL, [run_scope.PRIMARY])
    scope = run_scope.scope(full, stored.itertuples(index=False, name=None), name)
    if write_to is not None:
        _refuse_partial(scope, args.partial, write_to)
    data = load_data(wh)
    plan = load_plan(settings.analysis_plan_path())
    header = scope.header() if scope.partial else None
    misleading = results.misleading_example(wh.query_df)
    absent = results.absent_parts(data)
    blocks = [Block(results.BEGIN, results.END, results.render(data, plan, manifest, props, misleading, header),
                    "Results", "evalmislead results --write", absent),
              Block(readme_summary.BEGIN, readme_summary.END,
                    readme_summary.render(data, plan, header or readme_summary.short_provenance(manifest), misleading),
                    "summary", "evalmislead results --write")]
    if not scope.stored:
        for b in blocks:
            b.skip = {WHOLE: "the stored run has no thinking-off answers (the block describes thinking off)"}
    # the Java and JavaScript block of the same file is another run's (the screening), compared on its own
    other = {language_results.BEGIN: ("Java and JavaScript", "a run of its own, compared by `evalmislead results "
                                                             "--languages --check`")}
    return blocks, other, scope


def _language_blocks(wh: Warehouse) -> list[Block]:
    from evalmislead_assets.report import language_results
    from evalmislead_assets.study.models import LANGUAGE_NAMES

    counts = wh.query_df(language_results.COUNTS_SQL)
    section = language_results.render(counts, wh.query_df("SELECT * FROM language_comparisons"),
                                      list(LANGUAGE_NAMES))
    block = Block(language_results.BEGIN, language_results.END, section, "Java and JavaScript",
                  "evalmislead results --languages --write")
    if counts.empty or not (counts["language"].fillna("python") != "python").any():
        block.skip = {WHOLE: "the stored run has no Java or JavaScript answers"}
    return [block]


def _refuse_partial(scope: RunScope, partial: bool, path: Path) -> None:
    """One line and exit 2 when the rows are not the full study the text describes (``--partial``: a run
    with fewer cells may be written, labelled); rows of another run never."""
    if not scope.stored:
        raise ConfigError(f"the stored run has no thinking-off answers, and {path} describes thinking off; "
                          "run the study first (bash scripts/run-study.sh)")
    if scope.foreign:
        raise ConfigError(f"the stored rows hold answers {scope.full_name} does not have ({scope.foreign_line()}): "
                          f"they mix runs, so {path} is left as it is; write from a data folder holding one run")
    if scope.partial and not partial:
        raise ConfigError(f"the stored run is partial ({scope.covers_line()}; missing {scope.missing_line()}), "
                          f"and {path} describes {scope.full_name}; rerun the full study, or add --partial to "
                          "write it labelled as the partial run it is")


def _check(path: Path, text: str, present: list[Block], other: dict[str, tuple[str, str]],
           scope: RunScope | None, db: Path) -> int:
    """Compare each block's parts the stored run has; a unified diff of what differs; exit 0 / 1."""
    from evalmislead_assets.report import results

    skipped = [f"{name} ({why})" for begin, (name, why) in other.items() if begin in text]
    compared, stale = [], []
    for b in present:
        if WHOLE in b.skip:
            skipped.append(f"the {b.name} section ({b.skip[WHOLE]})")
            continue
        skipped += [f"{b.name}: {_short(part)} ({why})" for part, why in b.skip.items()]
        now = results.without(results.current(text, b.begin, b.end), set(b.skip))
        want = results.without("\n".join(b.lines), set(b.skip))
        compared.append(b.name)
        if now != want:
            stale.append(b)
            diff = list(difflib.unified_diff(now, want, f"{path} ({b.name})", f"from {db}", lineterm="", n=1))
            print("\n".join(diff[:DIFF_LINES] + ([f"... ({len(diff) - DIFF_LINES} more diff lines)"]
                                               if len(diff) > DIFF_LINES else [])), file=sys.stderr)
    if skipped:
        print(f"evalmislead: skipped {'; '.join(skipped)}", file=sys.stderr)
    if stale:
        fix = f"run {stale[0].command} {path}"
        if scope is not None and scope.partial:
            from evalmislead_assets.report.run_scope import PARTIAL_MARK

            if any(PARTIAL_MARK in results.current(text, b.begin, b.end) for b in stale):
                fix += " --partial"  # a partial run's copy: rewrite it as one
            else:  # the full run's copy: a partial run's figures never replace it
                fix = (f"the stored run is partial ({scope.covers_line()}), its figures are not those of "
                       f"{scope.full_name}: compare after a replay of the full study (bash scripts/run-study.sh)")
        print(f"evalmislead: the {', '.join(b.name for b in stale)} section(s) of {path} differ from what {db} gives "
              f"now (diff above); {fix}", file=sys.stderr)
        return 1
    if not compared:
        print(f"evalmislead: nothing of {path} compared: the stored run has none of its sections", file=sys.stderr)
        return 1
    print(f"evalmislead: the {', '.join(compared)} section(s) of {path} match {db}"
          + (" (on the parts the stored run has)" if skipped else ""))
    return 0


def _short(title: str) -> str:
    """A part's title up to its first colon or parenthesis: 'Mutation score', 'Run-to-run noise'."""
    return title.split(":")[0].split(" (")[0]
