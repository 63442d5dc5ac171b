"""`evalmislead run`: the main job, run as real Dagster runs recorded in DAGSTER_HOME."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from evalmislead_assets import config_check, data_lock, settings
from evalmislead_assets.cli.model_runs import ModelRun, StepFailed, failed_phrase, state_lines, utc_now
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm import stop_signals
from evalmislead_assets.study.models import ModelSpec, Study

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from evalmislead_assets.cli import run_plan

HELP = "Run the study end to end (problems, generation, execution, analysis, report) as Dagster runs."

# The demo on the bundled 0.5B coder model, sized to finish well inside 15 minutes on 2 cores (6 min measured):
# four short functions (task 30, the protocol's worked example, among them), the three primary
# conditions, an output cap that holds this model's usual 450-650-token answer, and a 3-answer
# determinism probe. --conditions all, --full and every EVALMISLEAD_* variable override it.
DEMO_PROBLEMS = "2,4,13,30"
DEMO_CONDITIONS = ["buggy_code", "fixed_code", "model_spec"]
DEMO_MAX_TOKENS_OFF = "768"
DEMO_MAX_TOKENS_ON = "1024"
DEMO_PROBE_N = "3"

# left out of a replay unless --mutation: at full size the mutants took 112 s and the mutant runs 75-143 s per
# condition on 2 cores (the README's stage table), about 11 minutes for six conditions, nearly as much as the rest of
# the chain together
MUTATION_SKIPPED = ("Mutation score: not run in this replay (about 11 min more at full size, six conditions, on 2 cores); add "
                    "--mutation to run it (bash scripts/run-study.sh --mutation)")
SCREENING_HINT = ("evalmislead: this run stored no misleading test; docs/bundled-models.md, \"Screening\", shows "
                  "which bundled model writes them (the 1.5B: scripts/bootstrap.sh --model-1.5b, then "
                  "evalmislead run --models qwen2.5-coder-1.5b)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--thinking", choices=["off", "on", "both"], default="off",
                   help="thinking modes to run (default: off, the primary setting)")
    p.add_argument("--conditions", default="",
                   help="comma-separated conditions, or 'all' (default: the three primary ones; with --full all six)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="Dagster console log level (default INFO; progress lines are INFO)")
    p.add_argument("--models", default="",
                   help="comma-separated models to run: names in the study file (study.toml) or bundled models "
                        "(qwen2.5-coder-0.5b, qwen2.5-coder-1.5b); default: the study file's models")
    p.add_argument("--problems", default="",
                   help="problems to run, e.g. 0-9,30 (overrides the study file's problems and EVALMISLEAD_PROBLEMS)")
    p.add_argument("--full", action="store_true",
                   help="all 164 problems, all six conditions and the protocol's caps unless EVALMISLEAD_* say otherwise")
    p.add_argument("--replay", nargs="?", const="bundled", default=None, metavar="PACK",
                   help="run the study from a recorded answer pack (default: the bundled full run of the 1.5B): "
                        "its study file, its problems, every answer from the pack, no request sent but the "
                        "determinism probe's live sample")
    p.add_argument("--mutation", action=argparse.BooleanOptionalAction, default=None,
                   help="run the mutants and the mutation score (default: yes, but not in a replay, where they "
                        "would add about 11 minutes at full size)")
    p.add_argument("--force", action="store_true",
                   help="run every step again, also those whose partitions are fresh and were made with the same "
                        "settings (default: such steps are skipped, naming them)")


def ensure_dagster_home() -> Path:
    """DAGSTER_HOME defaults to dagster_home/ in the project, seeded with the project's dagster.yaml."""
    home = settings.dagster_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        src = settings.PROJECT_ROOT / "dagster.yaml"
        if src.is_file() and not (home / "dagster.yaml").exists():
            shutil.copy(src, home / "dagster.yaml")
    except OSError as exc:
        raise ConfigError(f"DAGSTER_HOME={home} cannot be used ({exc.strerror or exc}); {DAGSTER_HOME_FIX}") from None
    settings.use_dagster_home(home)
    return home


DAGSTER_HOME_FIX = "set DAGSTER_HOME to a short writable folder, e.g. export DAGSTER_HOME=$HOME/dagster_home"
SQLITE_MAX_PATH = 512  # SQLite opens no file whose path is longer (SQLITE_MAX_PATHLEN)


def open_instance(home: Path) -> "DagsterInstance":
    """The Dagster instance of ``home``, its run storage opened once; one line naming DAGSTER_HOME when the
    instance cannot use it (a path too long for SQLite, a folder it cannot write, a bad dagster.yaml)."""
    from dagster import DagsterInstance

    try:
        instance = DagsterInstance.get()
        instance.get_run_records(limit=1)  # opens history/runs.db: where a DAGSTER_HOME it cannot use fails
    except Exception as exc:  # whatever Dagster or SQLite raise, one line naming the folder
        root: BaseException = exc
        while root.__cause__ is not None:
            root = root.__cause__
        words = (str(root).strip().splitlines() or [type(root).__name__])[0]
        runs_db = home / "history" / "runs.db"
        if len(str(runs_db)) > SQLITE_MAX_PATH:
            words += f"; its run history {runs_db.name} would have a {len(str(runs_db))}-character path, " \
                     f"SQLite's limit is {SQLITE_MAX_PATH}"
        raise ConfigError(f"DAGSTER_HOME={home} cannot be used by Dagster ({words}); {DAGSTER_HOME_FIX}") from None
    return instance


def run(args: argparse.Namespace) -> int:
    # SIGINT / SIGTERM: stop in seconds with 130 / 143 (a second signal exits at once), see stop_signals; the
    # running Dagster run is terminated through its run launcher first (instance_runs), within STOP_WAIT_S
    from evalmislead_assets.cli.instance_runs import STOP_WAIT_S

    stop_signals.install(grace_s=STOP_WAIT_S + 15)
    settings.ignore_recorded_overrides()  # this run's flags and defaults decide; it records them for later routes
    if getattr(args, "problems", ""):
        os.environ["EVALMISLEAD_PROBLEMS"] = args.problems  # the flag wins over the study file and the variable
    replay = None
    if getattr(args, "replay", None):
        from evalmislead_assets.cli import replay as replays
        from evalmislead_assets.study.conditions import CONDITION_NAMES as ALL_CONDITIONS

        chosen = [c.strip() for c in args.conditions.split(",") if c.strip()]
        folder = replays.DEFAULT_PACK if args.replay == "bundled" else Path(args.replay).expanduser()
        try:
            chosen, left_out = replays.default_conditions(folder, chosen, list(ALL_CONDITIONS))
            if left_out:
                print(f"evalmislead: {left_out}", flush=True)
            args.conditions = ",".join(chosen)
            replay = replays.prepare(folder, chosen)
        except replays.answer_pack.PackError as exc:
            raise ConfigError(str(exc)) from None
        args.full = True  # the recorded study's own caps and problems, not the demo's
    if not args.full:
        if settings.study_setting("problems") is None:  # the study file's problems win over the demo's
            settings.set_defaults({"EVALMISLEAD_PROBLEMS": DEMO_PROBLEMS})
        settings.set_defaults({
            "EVALMISLEAD_MAX_TOKENS_OFF": DEMO_MAX_TOKENS_OFF,
            "EVALMISLEAD_MAX_TOKENS_ON": DEMO_MAX_TOKENS_ON,
            "EVALMISLEAD_PROBE_N": DEMO_PROBE_N,
        })
    if getattr(args, "models", ""):
        settings.set_model_selection(args.models)  # before the study (and the definitions) are read
    # every setting, the DB path and the input files, before anything starts; then the study is recorded with
    # the data (the pack a replay imports, the values this run set for itself), so every later route uses it
    from evalmislead_assets.recorded_study import RECORDED_OVERRIDES

    cfg = config_check.check_before_run(
        pack=str(replay.pack.folder) if replay is not None else None,
        overrides={name: os.environ[name] for name in RECORDED_OVERRIDES if os.environ.get(name, "").strip()})
    settings.pin_study_text()  # the runs this command launches work from the study it recorded, edits or not
    # one run per DuckDB file and data folder: a second one stops here (exit 2), naming this pid; a Dagster
    # run started meanwhile (UI, backfill, `dagster asset materialize`) waits for this one to end
    data_lock.hold_data_folder(cfg.db, "evalmislead " + " ".join(sys.argv[1:]))
    home = ensure_dagster_home()
    instance = open_instance(home)  # before anything is written: a DAGSTER_HOME it cannot use is one line
    if replay is not None:
        print(f"evalmislead: {replay.line()}", flush=True)
        print(f"evalmislead: {replays.import_into(cfg.db, replay)}", flush=True)

    from evalmislead_assets import study_models
    from evalmislead_assets.cli import run_plan
    from evalmislead_assets.cli.instance_runs import InstanceRuns
    from evalmislead_assets.definitions import defs
    from evalmislead_assets.run_launcher import fail_stale_runs
    from evalmislead_assets.study.conditions import CONDITION_NAMES

    modes = ["off", "on"] if args.thinking == "both" else [args.thinking]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if conditions in ([], ["all"]):
        conditions = list(CONDITION_NAMES) if args.full or conditions == ["all"] else list(DEMO_CONDITIONS)
    unknown = [c for c in conditions if c not in CONDITION_NAMES]
    if unknown:
        raise ConfigError(f"unknown condition(s) {unknown}; choose from {', '.join(CONDITION_NAMES)}")

    graph = defs.resolve_asset_graph()
    study = study_models.study()
    mutation = replay is None if getattr(args, "mutation", None) is None else bool(args.mutation)
    # what runs, read off the definitions: each model's assets, their partitions, the optional parts
    plan = run_plan.build_plan(graph, study.names, list(study.languages), modes, conditions,
                               optional=["mutation"] if mutation else [])
    from evalmislead_assets.cli import up_to_date

    # what decides the rows besides Dagster's code and data versions; each run carries it (and the study's hash)
    fingerprint = up_to_date.settings_fingerprint(settings.study_text(), {})
    # the study's tags are written by every run itself (io_manager); this route adds only who launched it
    run_tags = {data_lock.DELEGATE_TAG: data_lock.study_holder(cfg.db)}
    # the one run config this route adds: the console logger (definitions.py's, which folds stack traces) at the
    # asked level; a run whose config names no logger gets Dagster's default console at DEBUG instead
    run_config = {"loggers": {"console": {"config": {"log_level": args.log_level}}}}
    for stale in fail_stale_runs(instance):  # a killed run's partition is free again
        print(f"evalmislead: {stale.line()}", flush=True)
    from evalmislead_assets.cli.summary import caps_text, problems_text

    subset = f"{problems_text(cfg.problems)} from {settings.problem_source()}"
    reaches = {m.name: study_models.reach(m, study) for m in study.models}
    llm = reaches[study.models[0].name].describe() if not study.prefixed else "each model's own (below)"
    print(f"evalmislead: DuckDB {cfg.db}; DAGSTER_HOME {home}; {subset}; "
          f"{caps_text(cfg.max_tokens_off, cfg.max_tokens_on, study.models, modes)}; LLM {llm}", flush=True)
    print(f"evalmislead: model{'s' if study.prefixed else ''} "
          f"{'; '.join(f'{m.name}: {reaches[m.name].describe()}{_own_caps(m)}' for m in study.models)} "
          f"(study file {study.source})", flush=True)

    for model in study.models:  # before anything runs: thinking-on work for a model that cannot think
        for mode in modes:
            model.refuse_thinking(mode, study.source)
    runs: list[ModelRun] = []
    down = _check_servers(study, reaches, replay is not None, runs)
    progress = Progress(cfg.db, cfg.problems, conditions, modes, study.names, study.languages)
    with InstanceRuns(instance, log_level=args.log_level) as launcher:
        print(f"evalmislead: {len(plan.steps)} steps from the definitions, each a Dagster run "
              f"{launcher.route()}", flush=True)

        def step(planned: run_plan.Step) -> None:
            """One Dagster run of the step; StepFailed when it fails (a stop signal exits)."""
            keys = list(planned.keys)
            pkey = planned.partition
            if not getattr(args, "force", False):  # what is fresh and made with these settings is not run again
                todo = up_to_date.keys_to_run(instance, graph, keys, pkey, fingerprint)
                if not todo:
                    print(f"evalmislead: up to date: {'+'.join(k.to_user_string() for k in keys)}"
                          f"{f' [{pkey}]' if pkey is not None else ''} (nothing changed; --force runs it again)",
                          flush=True)
                    return
                keys = todo
            label = f"{'+'.join(k.to_user_string() for k in keys)}" + (f" [{pkey}]" if pkey is not None else "")
            t0 = time.monotonic()
            print(f"evalmislead: materializing {label} ...", flush=True)
            try:
                result = launcher.materialize(keys, pkey, run_tags, run_config, stop_signals.stop_requested)
            except (KeyboardInterrupt, SystemExit):  # a stop signal: the run was terminated and has ended
                _stopped(label)
            if not result.success:
                if result.stopped or stop_signals.stop_requested():
                    _stopped(label)
                raise StepFailed(label, result.failure, planned.label)
            print(f"evalmislead: done {label} in {time.monotonic() - t0:.1f} s (run {result.run_id})", flush=True)

        try:
            for planned in plan.inputs:
                step(planned)
        except StepFailed as exc:
            raise SystemExit(_failure_text(exc, _llm_line(cfg.db, progress.since, failed="the run failed"))) from None
        for i, model in enumerate(study.models):  # one model after the other: on a CPU box one server at a time
            if model.name in down:
                continue  # its server did not answer before the run: failed at the server check
            who = f"{model.name} " if study.prefixed else ""
            current = ModelRun(model.name, utc_now())
            runs.append(current)
            try:
                for planned in plan.of_model(model.name):
                    step(planned)
                    if planned.stage == run_plan.CHAIN:
                        lang = "" if planned.language == study.languages[0] else f"{planned.language} "
                        what = f"specs [{planned.partition}]" if planned.specs_only else str(planned.partition)
                        progress.report(f"{who}{lang}{what}")
                    if planned.language == study.languages[0] and planned.stage == run_plan.CHAIN:
                        current.chain_done = _chain_done(plan, model.name, planned, study.languages[0])
            except StepFailed as exc:  # this model stops here; the next one goes on (its own server)
                current.failed_at, current.error = exc.stage, exc.failure
                current.until = utc_now()
                if not study.prefixed:
                    raise SystemExit(_failure_text(exc, current.requests_line(cfg.db, alone=True))) from None
                more = "; the other models go on" if i + 1 < len(study.models) else ""
                print(_failure_text(exc, current.requests_line(cfg.db), f"model {model.name} stops here{more}"),
                      file=sys.stderr, flush=True)
            current.until = current.until or utc_now()
        across_failed = ""
        if any(r.chain_done for r in runs):
            try:
                for planned in plan.across:
                    step(planned)
            except StepFailed as exc:
                across_failed = f"{exc.label} failed: {exc.failure}"
                print(f"evalmislead: {across_failed}", file=sys.stderr, flush=True)
    runs.sort(key=lambda r: study.names.index(r.name))  # models whose server was down were added first
    failed = [r for r in runs if r.failed]
    if any(r.chain_done for r in runs):
        _print_summary(cfg.db, progress.since, study, failed_phrase(runs), "" if mutation else MUTATION_SKIPPED)
    if study.prefixed:
        print("\n".join(state_lines(cfg.db, runs)), flush=True)
    if failed or across_failed:
        what = [f"{len(failed)} of {len(runs)} models failed ({', '.join(r.name for r in failed)})"] if failed else []
        what += ["the cross-model step failed"] if across_failed else []
        print(f"evalmislead: {'; '.join(what)}; stored rows are kept, re-run to resume", file=sys.stderr, flush=True)
        return 1
    return 0


def _chain_done(plan: run_plan.Plan, model: str, planned: run_plan.Step, language: str) -> bool:
    """The step just run was the last chain step of the model's first language: its chain is stored, so the
    cross-model step runs even if its analysis fails."""
    from evalmislead_assets.cli.run_plan import CHAIN

    chain = [s for s in plan.of_model(model) if s.stage == CHAIN and s.language == language]
    return bool(chain) and planned == chain[-1]


def _own_caps(model: ModelSpec) -> str:
    """The output caps a model's study entry sets (they replace the header's max_tokens for its requests)."""
    caps = [f"{name}={value}" for name, value in (("max_tokens_off", model.max_tokens_off),
            ("max_tokens_on", model.max_tokens_on), ("spec_max_tokens_off", model.spec_max_tokens_off)) if value]
    return f" ({', '.join(caps)})" if caps else ""


def _check_servers(study: Study, reaches: dict, replay: bool, runs: list[ModelRun]) -> set[str]:
    """Each model's server (and the spec judge's) before the problems are validated: one line and exit 1
    when nothing can run; in a study of several, a model whose server is down is marked failed (it is
    added to ``runs``) and the others go on. Returns the names of those models."""
    from evalmislead_assets.cli.server_check import unreachable_servers

    if replay or settings.replay_only():  # answers come from the pack: nothing is sent but the probe's sample
        return set()
    judge = [u.strip().rstrip("/") for u in settings.judge_url().split(",") if u.strip()]
    down = unreachable_servers(reaches, judge)
    if not down:
        return set()
    names = {d.model for d in down if d.model}
    if any(not d.model for d in down) or not study.prefixed or len(names) == len(study.models):
        raise SystemExit("\n".join(d.line() for d in down))
    for d in down:
        now = utc_now()
        runs.append(ModelRun(d.model, now, now, failed_at="server check", error=d.error))
        print(f"{d.line()}; model {d.model} stops here, the other models go on", file=sys.stderr, flush=True)
    return names


def _failure_text(exc: StepFailed, requests: str, tail: str = "") -> str:
    return (f"evalmislead: {exc.label} failed: {exc.failure}\n{requests}\n(stored rows are kept; re-run to resume"
            f"{'; ' + tail if tail else ''})")


def _stopped(label: str) -> NoReturn:
    """Exit 130 / 143 after SIGINT / SIGTERM: answers stored so far are kept, in-flight ones were abandoned."""
    stop_signals.wait_for_signal(1.0)  # the watcher thread may read the signal just after Dagster's handler ran
    print(f"evalmislead: stopped by {stop_signals.signal_name()} during {label}; answers already stored are kept, "
          "re-run to resume", file=sys.stderr, flush=True)
    raise SystemExit(stop_signals.exit_code())


def _llm_line(db: Path, since: object, failed: str = "") -> str:
    from evalmislead_assets.cli.summary import llm_calls_line

    try:
        return llm_calls_line(db, since, failed=failed)  # type: ignore[arg-type]
    except Exception as exc:  # the failure may be the database itself: its own line above says so
        return f"LLM requests this run: not counted ({type(exc).__name__} reading {db})"


class Progress:
    """This run's answers stored so far, tokens/s and an ETA, printed after each generation step."""

    def __init__(self, db: Path, problems: list[int] | None, conditions: list[str], modes: list[str],
                 models: list[str], languages: tuple[str, ...] = ("python",)) -> None:
        import datetime as dt

        from evalmislead_assets import study_models

        self.db, self.conditions, self.modes, self.models = db, conditions, modes, models
        self.languages = list(languages)
        self.unnamed = study_models.unnamed_rows_model()
        self.problems = list(range(164)) if problems is None else problems
        self.total = len(models) * len(languages) * len(modes) * (len(conditions) + 1) * len(self.problems)
        self.start = time.monotonic()
        self.since = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)  # llm_calls.ts is naive UTC

    def report(self, label: str) -> None:
        from evalmislead_assets.store.database import Warehouse

        modes, conds, probs, models, langs = self.modes, self.conditions, self.problems, self.models, self.languages
        # rows without a model are the first model's; every row names its language
        mine = "list_contains(?, coalesce(model_name, ?)) AND list_contains(?, language)"
        row = Warehouse(self.db).query_df(
            f"SELECT (SELECT count(*) FROM test_generations WHERE list_contains(?, thinking) "
            f"AND list_contains(?, condition) AND list_contains(?, problem_idx) AND {mine}) "
            f"+ (SELECT count(*) FROM model_specs WHERE list_contains(?, thinking) AND list_contains(?, problem_idx) "
            f"AND {mine}) AS answers, (SELECT coalesce(sum(completion_tokens), 0) FROM llm_calls WHERE ts >= ?) AS tokens, "
            f"(SELECT count(*) FROM llm_calls WHERE ts >= ?) AS sent",
            [modes, conds, probs, models, self.unnamed, langs, modes, probs, models, self.unnamed, langs, self.since,
             self.since], read_only=True).iloc[0]
        done, tokens = min(int(row["answers"]), self.total), int(row["tokens"])
        elapsed = time.monotonic() - self.start
        from evalmislead_assets.cli.summary import progress_text

        print(f"evalmislead: progress after {label}: "
              f"{progress_text(done, self.total, int(row['sent']), tokens, elapsed)}", flush=True)


def _print_summary(db: Path, since: object, study: Study, failed: str = "", skipped: str = "") -> None:
    from evalmislead_assets.cli.summary import summary_lines

    base = settings.report_dir()
    folders = [base / m.key for m in study.models] if study.prefixed else [base]
    reports = [f / name for f in folders for name in ("report.md", "report.html")] + [base / "models.md"]
    print("\n".join(summary_lines(db, reports, since=since, models=study.names,  # type: ignore[arg-type]
                                  screening_hint=SCREENING_HINT, failed=failed, skipped=skipped)), flush=True)
    if study.other_languages:
        from evalmislead_assets.cli.summary import language_lines

        print("\n".join(language_lines(db, list(study.languages), base / "languages.md")), flush=True)


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(thinking="off", conditions="", full=False, log_level="INFO", problems="")))
