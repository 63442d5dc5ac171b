"""Verdict forgeries the verified subset must reject: read by the tests, never collected."""

collect_ignore_glob = ["*.py"]
