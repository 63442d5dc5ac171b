"""Everything a run needs, checked before its first request: settings, the DB path, the input files.

`check_before_run()` raises `ConfigError` (one line naming the file or variable and the fix) on
the first problem; `evalmislead run` turns it into rc 2, and the IO manager calls it when a
Dagster run sets up its resources, so `dagster asset materialize` stops before any step too.
Nothing here writes: a missing DB file or review CSV is fine (the run creates them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

if TYPE_CHECKING:
    from evalmislead_assets.study.models import Study

# A DuckDB database file starts with a checksum (8 bytes), then the magic bytes "DUCK".
DUCKDB_MAGIC = b"DUCK"
DUCKDB_MAGIC_OFFSET = 8


def check_db_path(path: Path) -> None:
    """The DuckDB file is absent (created on first write) or a DuckDB file we may write; its folder can be made."""
    path = Path(path)
    where = f"EVALMISLEAD_DB={path}"
    if path.is_dir():
        raise ConfigError(f"{where} is a directory; point EVALMISLEAD_DB at a file, e.g. {path / 'evalmislead.duckdb'}")
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"{where} is not a regular file; point EVALMISLEAD_DB at a DuckDB file")
        try:
            with open(path, "rb") as fh:
                head = fh.read(DUCKDB_MAGIC_OFFSET + len(DUCKDB_MAGIC))
        except OSError as exc:
            raise ConfigError(f"{where} cannot be read ({exc.strerror}); fix its permissions") from None
        if not head:  # DuckDB refuses an empty file too
            raise ConfigError(f"{where} is an empty file, not a DuckDB database; delete it (the run creates "
                              "the database) or point EVALMISLEAD_DB at another file")
        if head[DUCKDB_MAGIC_OFFSET:] != DUCKDB_MAGIC:
            raise ConfigError(f"{where} is not a DuckDB database (no DuckDB header); move it away or point "
                              "EVALMISLEAD_DB at another file")
        if not os.access(path, os.R_OK | os.W_OK):
            raise ConfigError(f"{where} is not writable; fix its permissions or point EVALMISLEAD_DB elsewhere")
        from evalmislead_assets.store.faults import StorageCorrupt
        from evalmislead_assets.store.integrity import check_readable

        try:  # a truncated or damaged file keeps its header: open it read-only and read its catalog
            check_readable(path)
        except StorageCorrupt as exc:
            raise ConfigError(str(exc)) from None
        return
    folder = path.parent
    while not folder.exists():  # the nearest folder that exists must let us create the rest
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{where}: {folder} is a file, not a folder; point EVALMISLEAD_DB elsewhere")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: folder {folder} is not writable; fix its permissions or point EVALMISLEAD_DB elsewhere")


def check_data_folder(folder: Path | None = None) -> None:
    """The data folder (EVALMISLEAD_HOME: the dataset cache, the report, the review CSV) can be written: one
    line naming it otherwise, before anything starts to write there."""
    folder = Path(folder) if folder is not None else settings.project_data_dir()
    nearest = folder
    while not nearest.exists():
        nearest = nearest.parent
    if not nearest.is_dir() or not os.access(nearest, os.W_OK | os.X_OK) or _read_only_mount(nearest):
        raise ConfigError(f"the data folder {folder} is not writable ({nearest} is read-only or not a folder); "
                          "fix its permissions or point EVALMISLEAD_HOME at a writable folder")


def _read_only_mount(path: Path) -> bool:
    """A folder on a file system mounted read-only (root's os.access says writable there)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


MIN_TEMP_FREE = 64 << 20  # bytes: the test sandbox writes each batch's files (and coverage data) there


def check_temp_space() -> None:
    """The temporary folder (TMPDIR, else /tmp) has room for the test sandbox: a nearly full one would fail
    later, inside a step, with "No space left on device" and no folder named."""
    import shutil
    import tempfile

    folder = tempfile.gettempdir()
    try:
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise ConfigError(f"the temporary folder {folder} (TMPDIR) cannot be read ({exc.strerror}); "
                          "point TMPDIR at a writable folder") from None
    if free < MIN_TEMP_FREE:
        raise ConfigError(f"the temporary folder {folder} (TMPDIR) has {free / 2**20:.1f} MiB free; a run needs "
                          f"{MIN_TEMP_FREE >> 20} MiB there for the test sandbox: free space in it or point TMPDIR "
                          "at a folder with room")


def check_input_files() -> None:
    """The analysis plan, its keyword file and (when present) the review CSV parse; each loader names its file."""
    from evalmislead_assets.analysis import plan as analysis_plan
    from evalmislead_assets.analysis import secondary as analysis_secondary
    from evalmislead_assets.analysis import spec_labels
    from evalmislead_assets.analysis.reasoning_mentions import load_keywords

    plan = analysis_plan.load_plan(settings.analysis_plan_path())
    load_keywords(analysis_secondary.keywords_path(plan))
    review = settings.review_csv_path()
    if review.is_dir():
        raise ConfigError(f"review file {review} is a directory; point EVALMISLEAD_REVIEW_CSV at a CSV file")
    if review.exists():
        spec_labels.read_review_csv(review)


def check_models(study: "Study") -> None:
    """Each model the embedded server would load is there: a bundled model's packages are installed (the
    1.5B only with `scripts/bootstrap.sh --model-1.5b`), a gguf file exists. Servers given by URL are not
    contacted here (a run reports an unreachable one with its URL)."""
    from evalmislead_assets.llm import embedded_model

    if settings.llm_urls() or settings.embedded_model_override():
        return  # a one-model study pointed elsewhere
    for m in study.models:
        if m.urls:
            continue
        if m.bundled:
            bundled = embedded_model.bundled(m.bundled)
            if not embedded_model.installed(bundled):
                raise ConfigError(f"model {m.name}: the bundled {bundled.name} is not installed; {bundled.install_hint()}")
        elif m.gguf and not Path(m.gguf).expanduser().is_file():
            raise ConfigError(f"model {m.name}: gguf file {m.gguf} is missing; fix its path in {study.source}")


def check_before_run(db: Path | None = None, pack: str | None = None,
                     overrides: dict[str, str] | None = None) -> settings.Settings:
    """Every setting, the DB path (``db`` or EVALMISLEAD_DB) and the input files; returns the settings. Then the
    study is recorded with the data (recorded_study): its text, the answer pack a replay imports (``pack``)
    and the run-level values `evalmislead run` set (``overrides``)."""
    cfg = settings.load()
    from evalmislead_assets import recorded_study, study_models

    check_models(study_models.check())  # the study file, the model selection, each model's file
    path = Path(db) if db is not None else cfg.db
    check_db_path(path)
    check_data_folder()
    check_temp_space()
    check_input_files()
    try:
        recorded_study.record(path, settings.study_path(), settings.study_text(), pack=pack, overrides=overrides)
    except OSError as exc:
        raise ConfigError(f"the study cannot be recorded beside {path} ({exc.strerror or exc}); make the data "
                          "folder writable or point EVALMISLEAD_HOME at a writable folder") from None
    return cfg
