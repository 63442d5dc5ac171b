"""The README.md of a reproduction package: what it holds, where it was made, how to check it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _models(made: Mapping[str, Any]) -> list[str]:
    out = []
    for m in made.get("models") or []:
        sha = m.get("sha256")
        what = f"`{m.get('file')}`, sha256 `{sha}`" if sha else (m.get("note") or "file not known here")
        out.append(f"- {m.get('name')} ({m.get('source')}): {what}")
    return out or ["- (not recorded)"]


def package_readme(name: str, rows: Mapping[str, int], made: Mapping[str, Any], fmt: str) -> str:
    git = made.get("git") or {}
    commit = git.get("commit") or "unknown (not exported from a git checkout)"
    dirty_words: dict[object, str] = {True: " with uncommitted changes (dirty)", False: " (clean)"}
    dirty = dirty_words.get(git.get("dirty"), "")
    llama = made.get("llama_cpp") or {}
    env = made.get("python") or {}
    tables = "\n".join(f"| `{t}` | {n} |" for t, n in rows.items())
    return f"""# {name}: an evalmislead reproduction package

This folder holds one run of the evalmislead study: whether a language model, asked to write unit tests
for buggy code, writes tests that pass on the bug and fail on the fix (misleading tests).

## What is here

| path | what |
|---|---|
| `manifest.json` | every file with its size and sha256; table row counts; the analysis plan's version and sha256; where the package was made (below) |
| `SHA256SUMS` | the same sums, for `sha256sum -c SHA256SUMS` |
| `plan/` | the preregistered analysis plan and its change log |
| `prompts/` | every prompt template and keyword list the run used |
| `tables/<table>.{fmt}` | every table of the study's DuckDB file (`llm_cache`, the raw answers, only with `--with-cache`) |
| `generated_tests/<thinking>/<condition>/<task>.py` | each test module extracted from a model's answer |
| `review/` | the spec-label review files (human labels), when filled in |
| `report/` | the study report (and the per-test viewer) when one was written |
| `environment/requirements.lock` | the Python distributions installed (name==version) |

Rows per table:

| table | rows |
|---|---|
{tables}

## Where it was made

- code: evalmislead git commit `{commit}`{dirty}
- Python {env.get('python', '?')} on {env.get('platform', '?')}
- llama.cpp: {llama.get('build', 'unknown')}; the binary says `{llama.get('binary_version')}`
- models:
{chr(10).join(_models(made))}

## Check it

With evalmislead installed (the commit above; `pip install -r environment/requirements.lock` pins the
rest), no GPU and no model needed:

    evalmislead verify .

re-checks the sha256 of every file against `manifest.json`; recomputes every stored test's cell from its
statuses and every derived table (condition_rates, the comparisons, the problem-level and repetition tables,
...) from the package's own rows under `plan/`, and names the first value that does not follow; then
re-runs a seeded sample of the stored tests (`tables/test_outcomes`) against the buggy and the fixed
version of their problem in the project's sandbox and compares each status with the stored one.
`--sample N` and `--seed S` choose the sample; `--sample 0` checks the sums and the consistency only.
Without evalmislead, `sha256sum -c SHA256SUMS` checks the sums.

The tables are {fmt} files: `duckdb -c "select * from 'tables/condition_rates.{fmt}'"` reads one.
"""
