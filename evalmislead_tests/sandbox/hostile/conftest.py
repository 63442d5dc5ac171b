"""Hostile test files: inputs the sandbox tests run through the sandbox, never collected by this suite."""

collect_ignore_glob = ["*.py"]
