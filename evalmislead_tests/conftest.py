"""Shared fixtures: one real embedded llama-server per test session, and a seeded DuckDB file."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from evalmislead_assets.llm.llama_server import EmbeddedServer, smollm2_model
from evalmislead_assets.store.database import Warehouse


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real llama-server with the 135M SmolLM2 (2 slots), started once per session.

    For tests that need *a* server fast (protocol, caching, grammars); tests of what the
    model writes use `coder_server`. A missing binary or model fails the tests that use it
    (ServerError): it is never skipped.
    """
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    # One thread: it runs beside other tests (and the coder model's server) on 2 cores, where a
    # 2-thread llama.cpp loses most of its speed to barrier waits whenever a thread is descheduled.
    server = EmbeddedServer(parallel=2, ctx_per_slot=2048, log_path=log, model=smollm2_model(), threads=1).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def problems_df(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The 164 problems as loaded by the problems asset (parsed once per session)."""
    from evalmislead_assets.study.problems import load_problems

    return load_problems(source="local", cache_dir=tmp_path_factory.mktemp("hf-cache"))


@pytest.fixture
def seeded_warehouse(tmp_path, monkeypatch: pytest.MonkeyPatch, problems_df: pd.DataFrame) -> Warehouse:
    """A DuckDB file (EVALMISLEAD_DB points at it) with `problems` and every pair marked valid.

    The oracle itself is not run here (test_validation does that); downstream assets only need the rows.
    """
    path = tmp_path / "study.duckdb"
    monkeypatch.setenv("EVALMISLEAD_DB", str(path))
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path / "home"))
    wh = Warehouse(path)
    wh.replace_rows("problems", problems_df)
    validation = pd.DataFrame({
        "task_id": problems_df["task_id"], "problem_idx": problems_df["problem_idx"],
        "buggy_passed": False, "fixed_passed": True, "buggy_detail": "seeded", "fixed_detail": "seeded",
        "seconds": 0.0, "valid": True,
    })
    wh.replace_rows("problem_validation", validation)
    return wh
