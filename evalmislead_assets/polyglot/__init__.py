"""The study's domain layer for JavaScript and Java (HumanEvalPack's js and java splits); no Dagster, no settings.

- ``problems.py``: the shipped splits (sha256-checked) -> buggy and fixed programs and the dataset's oracle.
- ``oracle.py`` / ``java_oracle.py`` / ``OracleBatch.java``: the oracle per problem and version (buggy must fail,
  fixed pass; Java many at once in one JVM first), and why a problem is excluded.
- ``extraction.py``: answer text -> a JS or Java test file (fences, imports, wrappers, re-declarations).
- ``process.py`` / ``confine.py``: one confined process per run (namespaces, read-only filesystem, rlimits,
  time limit, private work folder) and its nonce channel.
- ``js_runner.py`` / ``harness.cjs``: node:test collection and one process per test id and version.
- ``java_runner.py`` / ``EvalHarness.java``: JUnit 5 collection and one JVM per test id and version.
- ``scoring.py``: test ids against both versions and the four cells (Python's rules, reused).

The design, what is measured and what is not built yet: docs/languages.md.
"""
