"""The study a data folder was made with, stored beside its DuckDB file, so that every route (`run`, `dev` and
the UI, `backfill`, `export`, `results`, `verify`, `sql`) names the same study as the run that wrote the rows.

Two files sit next to ``<data>/<name>.duckdb``:

- ``<name>.study.toml``: the study file's text exactly as the last run read it (so its sha256 is the file's);
- ``<name>.study.json``: where that text came from (``source``), its ``sha256``, the answer pack a replay
  imported (``pack``), when it was recorded, and the run-level values the run used that are not in the study
  file (``overrides``: the problem subset, the output caps and the probe size of `evalmislead run`'s demo or a
  replay), so a later route that sets none of them uses the run's values, not the code's defaults.

Resolution (``settings.study_path``): EVALMISLEAD_STUDY when set, else the recorded source when it still
exists, else the recorded copy, else the project's ``study.toml``. A study file set by EVALMISLEAD_STUDY that is
neither the recorded source nor a file with the recorded text is refused in one line naming both: a data folder
holds one study (another study belongs in another data folder).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from evalmislead_assets.errors import ConfigError

# run-level values `evalmislead run` may set for its own process (its demo defaults, a replay's problems and
# probe size); recorded so that the UI, `backfill` and `dev` of the same data folder run with the same values
RECORDED_OVERRIDES = ("EVALMISLEAD_PROBLEMS", "EVALMISLEAD_MAX_TOKENS_OFF", "EVALMISLEAD_MAX_TOKENS_ON",
                      "EVALMISLEAD_PROBE_N")


@dataclass(frozen=True)
class RecordedStudy:
    copy: Path  # the recorded text
    source: Path  # the file it was read from
    sha256: str
    pack: str | None = None
    recorded_at: str = ""
    overrides: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        via = f", replayed from the answer pack {self.pack}" if self.pack else ""
        return f"{self.source} (sha256 {self.sha256[:12]}{via})"


def record_paths(db: Path) -> tuple[Path, Path]:
    """The recorded study's text and its description, beside the DuckDB file ``db``."""
    return db.with_name(db.stem + ".study.toml"), db.with_name(db.stem + ".study.json")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def read(db: Path) -> RecordedStudy | None:
    """The study recorded for ``db``; None when none is (a data folder made before studies were recorded, or
    not made yet). A damaged description is one line naming the file."""
    copy, meta = record_paths(db)
    if not meta.is_file():
        return None
    try:
        raw = json.loads(meta.read_text())
        return RecordedStudy(copy=copy, source=Path(raw["source"]), sha256=str(raw["sha256"]),
                             pack=raw.get("pack"), recorded_at=str(raw.get("recorded_at", "")),
                             overrides={str(k): str(v) for k, v in (raw.get("overrides") or {}).items()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the data folder's study record {meta} cannot be read ({exc}); delete it (and "
                          f"{copy.name}) to record the study again at the next run") from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.expanduser().resolve() == b.expanduser().resolve()
    except OSError:
        return False


def _text_sha(path: Path) -> str | None:
    try:
        return sha256_text(path.expanduser().read_text())
    except OSError:
        return None


def resolve(explicit: Path | None, recorded: RecordedStudy | None, default: Path, db: Path) -> Path:
    """The study file a process uses (see the module's docstring); ConfigError when ``explicit`` is another study
    than the one the data folder ``db`` was made with."""
    if recorded is None:
        return explicit if explicit is not None else default
    if explicit is not None:
        if _same_file(explicit, recorded.source) or _text_sha(explicit) == recorded.sha256:
            return explicit
        raise ConfigError(
            f"EVALMISLEAD_STUDY={explicit} is another study than the one the data folder of {db} was made with, "
            f"{recorded.describe()}; unset EVALMISLEAD_STUDY to go on with that study, or start the new one in "
            f"another data folder (EVALMISLEAD_HOME=<new folder>, or EVALMISLEAD_DB=<new file>)")
    if recorded.source.is_file():
        return recorded.source
    return recorded.copy


def record(db: Path, study_file: Path, text: str, pack: str | None = None,
           overrides: dict[str, str] | None = None) -> RecordedStudy:
    """Store ``text`` (read from ``study_file``) as the study of the data folder of ``db``; a pack recorded
    before is kept when this run names none (a later UI run of a replayed study), and so are the recorded
    overrides. Written only when something changed, each file by an atomic rename."""
    before = read(db)
    copy, meta = record_paths(db)
    pack = pack if pack is not None else (before.pack if before is not None else None)
    kept = dict(before.overrides) if before is not None else {}
    if overrides is not None:
        kept = dict(overrides)
    digest = sha256_text(text)
    source = study_file.expanduser().resolve()
    if (before is not None and before.sha256 == digest and before.source == source and before.pack == pack
            and before.overrides == kept and copy.is_file()):
        return before
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    description = {"source": str(source), "sha256": digest, "pack": pack, "recorded_at": now, "overrides": kept}
    copy.parent.mkdir(parents=True, exist_ok=True)
    for path, content in ((copy, text), (meta, json.dumps(description, indent=2) + "\n")):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(content)
        os.replace(tmp, path)
    return RecordedStudy(copy=copy, source=source, sha256=digest, pack=pack, recorded_at=now, overrides=kept)
