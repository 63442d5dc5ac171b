"""Honest test files: inputs test_sandbox_honest.py runs through the sandbox and plain pytest, never collected here."""

collect_ignore_glob = ["*.py"]
