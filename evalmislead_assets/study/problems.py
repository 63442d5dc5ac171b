"""HumanEvalPack (Python) problems, loaded with `datasets` from the copy shipped in the package."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalmislead_assets.store.hashing import sha256_file

# The files shipped inside the package (pyproject's package-data), so a fresh install needs no network.
PACKAGE_DATA_DIR = Path(__file__).resolve().parents[1] / "data"
DATA_FILE = PACKAGE_DATA_DIR / "humanevalpack_python.jsonl"
LICENSE_FILE = PACKAGE_DATA_DIR / "HUMANEVALPACK_LICENSE"
SOURCES = ("local", "hub")
# sha256 of the shipped file (the same rows as bigcode/humanevalpack, config "python").
DATA_SHA256 = "b1376d72be4bd016a62ad043d9de3846edb8d63edf1222da802a31330c14c3a7"
N_PROBLEMS = 164
REQUIRED_FIELDS = [
    "task_id", "declaration", "signature", "docstring", "prompt", "canonical_solution",
    "buggy_solution", "bug_type", "failure_symptoms", "entry_point", "test", "example_test",
]


class DatasetError(RuntimeError):
    """The dataset file is missing or does not match; one line naming the file."""


def load_problems(
    path: Path | None = None, expected_sha256: str | None = DATA_SHA256, *, source: str, cache_dir: Path,
) -> pd.DataFrame:
    """All problems as a DataFrame; verifies the file's sha256 and the fields before use.

    ``source``: ``local`` (the shipped file) or ``hub`` (bigcode/humanevalpack); ``cache_dir``: the
    `datasets` cache (the wiring passes EVALMISLEAD_DATASET_SOURCE and <data>/hf-cache from settings).
    """
    if source not in SOURCES:
        raise ValueError(f"dataset source {source!r} is not one of {', '.join(SOURCES)}")
    path = Path(path or DATA_FILE)
    if not path.is_file():
        raise DatasetError(f"dataset file {path} is missing; reinstall the package (it ships the data)")
    digest = sha256_file(path)
    if expected_sha256 and digest != expected_sha256:
        raise DatasetError(
            f"dataset file {path} is corrupted or changed (sha256 {digest[:12]}..., expected {expected_sha256[:12]}...); "
            "restore it from the package"
        )
    if source == "hub":
        return _from_hub()
    import datasets

    datasets.disable_progress_bars()
    try:
        ds = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=_cache_dir(cache_dir))
    except Exception as exc:  # malformed JSON lines and the like
        raise DatasetError(f"dataset file {path} could not be parsed: {str(exc).splitlines()[0]}") from exc
    return _frame(ds.to_pandas(), path)


def _cache_dir(d: Path) -> str:
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    return str(d)


def _from_hub() -> pd.DataFrame:
    """Only when EVALMISLEAD_DATASET_SOURCE=hub: the same rows from bigcode/humanevalpack."""
    import datasets

    ds = datasets.load_dataset("bigcode/humanevalpack", "python", split="test")
    return _frame(ds.to_pandas(), Path("bigcode/humanevalpack"))


def _frame(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    missing = [f for f in REQUIRED_FIELDS if f not in df.columns]
    if missing:
        raise DatasetError(f"dataset file {path} lacks fields {missing}")
    if len(df) != N_PROBLEMS:
        raise DatasetError(f"dataset file {path} has {len(df)} rows, expected {N_PROBLEMS}")
    out = df[REQUIRED_FIELDS].copy()
    out["problem_idx"] = out["task_id"].str.split("/").str[1].astype(int)
    # The code under test: helper definitions + imports + def line (the dataset's
    # `declaration`, which has no docstring for the entry point) + the body.
    out["buggy_code"] = out["declaration"] + out["buggy_solution"]
    out["fixed_code"] = out["declaration"] + out["canonical_solution"]
    out["source_sha256"] = sha256_file(path) if path.is_file() else "hub"
    return out.sort_values("problem_idx").reset_index(drop=True)


def select(df: pd.DataFrame, subset: list[int] | None) -> pd.DataFrame:
    if subset is None:
        return df
    return df[df["problem_idx"].isin(subset)].reset_index(drop=True)


def study_problems_from(problems: pd.DataFrame, validation: pd.DataFrame, subset: list[int] | None) -> pd.DataFrame:
    """Problems the study runs on: validated pairs only (from the two tables' frames), restricted to ``subset``
    (EVALMISLEAD_PROBLEMS in the wiring; None: all)."""
    valid = set(validation.loc[validation["valid"].fillna(False).astype(bool), "task_id"])
    df = problems[problems["task_id"].isin(valid)].sort_values("problem_idx", kind="stable").reset_index(drop=True)
    if df.empty:
        raise RuntimeError("no validated problems stored; materialize problems and problem_validation first")
    return select(df, subset)


def problem_ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5, 30] -> '0-2,5,30' (the partition's problem set, shown in the UI)."""
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
