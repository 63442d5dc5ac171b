"""Verdict forgeries the verified subset must reject (issue 26): read by the tests, never collected."""

collect_ignore_glob = ["*.py"]
