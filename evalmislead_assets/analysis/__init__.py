"""Pure analyses over stored rows: plan, rates, paired bootstrap, secondary analyses, spec labels, determinism, coverage.

No Dagster, and nothing from report/ (pyproject.toml, [tool.importlinter])."""
