"""The error every layer raises for a bad setting or input file: one line naming the value and the fix.

It lives apart from ``settings`` so that the domain packages can raise it without reading the
environment (the import-linter contracts in pyproject.toml forbid them ``settings``).
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad setting; the message is one line naming the variable and the fix."""
