"""`evalmislead score`: the study's runner on a user's own files."""

import json
from pathlib import Path

import pytest

from evalmislead_assets.cli import main
from evalmislead_tests.execution.test_scoring import BUGGY, FIXED, WORKED_EXAMPLE


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"buggy": tmp_path / "buggy.py", "fixed": tmp_path / "fixed.py", "tests": tmp_path / "test_mine.py"}
    paths["buggy"].write_text(BUGGY)
    paths["fixed"].write_text(FIXED)
    paths["tests"].write_text(WORKED_EXAMPLE)
    return paths


def _args(files: dict[str, Path], *extra: str) -> list[str]:
    return ["score", "--function", "get_positive", "--buggy", str(files["buggy"]), "--fixed", str(files["fixed"]),
            "--tests", str(files["tests"]), *extra]


def test_json_on_the_worked_example(files, capsys) -> None:
    assert main(_args(files, "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"] == {"misleading": 6, "effective": 0, "both_pass": 1, "both_fail": 0, "limit": 0}
    assert (out["verified"], out["unverified_reason"]) == (True, None)
    assert len(out["tests"]) == 7 and out["n_tests"] == 7 and out["error"] is None
    first = out["tests"][0]
    assert {"test_id", "buggy_status", "fixed_status", "outcome"} <= set(first)
    assert (first["test_id"], first["buggy_status"], first["fixed_status"], first["outcome"]) == (
        "test_all_positive_gives_empty", "passed", "failed", "misleading")


def test_plain_output_is_a_table_with_counts(files, capsys) -> None:
    assert main(_args(files)) == 0
    out = capsys.readouterr().out
    assert "test_empty_list" in out and "both_pass" in out
    assert "7 tests: misleading 6 (85.7 %), effective 0 (0.0 %), both_pass 1 (14.3 %), both_fail 0 (0.0 %)" in out
    assert "verified: yes" in out


def test_survives_a_hostile_file(files, capsys) -> None:
    files["tests"].write_text(
        "import os, signal\nfrom solution import get_positive\n\n"
        "def test_kills_parent():\n    os.kill(os.getppid(), signal.SIGKILL)\n\n"
        "def test_loops():\n    while True:\n        pass\n\n"
        "def test_exits():\n    os._exit(0)\n\n"
        "def test_real():\n    assert get_positive([1, -1]) == [-1]\n")
    assert main(_args(files, "--json", "--timeout", "1.5")) == 0
    out = json.loads(capsys.readouterr().out)
    got = {t["test_id"]: (t["buggy_status"], t["fixed_status"], t["outcome"]) for t in out["tests"]}
    assert got["test_loops"][:2] == ("timeout", "timeout")
    assert got["test_exits"][:2] == ("crashed", "crashed")
    assert got["test_real"] == ("passed", "failed", "misleading")
    assert got["test_kills_parent"] == ("passed", "passed", "both_pass")  # the sandbox shrugs it off
    assert (out["verified"], out["unverified_reason"]) == (False, "imports os")  # the file's flag, as stored


def test_markdown_answer_is_extracted(files, capsys, tmp_path: Path) -> None:
    answer = tmp_path / "answer.md"
    answer.write_text("Here you go:\n\n```markdown\n```python\n" + WORKED_EXAMPLE + "```\n```\n")
    files["tests"] = answer
    assert main(_args(files, "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extraction"] == "fence:markdown>python" and out["counts"]["misleading"] == 6


def test_unimportable_tests_exit_1_with_the_reason(files, capsys) -> None:
    files["tests"].write_text("from mymod import get_positive, other\n\ndef test_a():\n    pass\n")
    assert main(_args(files)) == 1
    out = capsys.readouterr().out
    assert "0 tests" in out and "No module named 'mymod'" in out


@pytest.mark.parametrize("broken,message", [
    ("missing", "does not exist"),
    ("no_function", "does not define 'get_positive'"),
])
def test_user_errors_are_one_line_exit_2(files, capsys, broken: str, message: str) -> None:
    if broken == "missing":
        files["fixed"] = files["fixed"].with_name("nope.py")
    else:
        files["buggy"].write_text("def something_else():\n    pass\n")
    assert main(_args(files)) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_host_limit_too_low_for_the_sandbox_is_one_line_exit_2(files) -> None:
    """Under a hard open-file limit below what the runner needs, one line before anything runs."""
    import os
    import resource
    import subprocess
    import sys

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (31, 31))

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", *_args(files)], cwd=repo, preexec_fn=lower,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "needs open_files >= 32" in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_a_file_writing_forged_lines_is_tampered_and_the_json_still_comes(files, capsys) -> None:
    """An unknown status / a non-object line does not make `score` exit 1 with no JSON (losing the batch); the
    runtime path (one malformed line costs one test) is in sandbox/test_sandbox_adversarial.py."""
    files["tests"].write_text(
        "import os\nfrom solution import get_positive\n\n"
        "def test_unknown_status():\n    for fd in range(3, 1024):\n        try:\n"
        "            os.write(fd, b'{\"status\": \"weird\", \"detail\": \"\"}\\n[1]\\n')\n"
        "        except OSError:\n            pass\n    assert False\n\n"
        "def test_honest():\n    assert get_positive([1, -1]) == [-1]\n")
    assert main(_args(files, "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    statuses = {t["test_id"]: (t["buggy_status"], t["fixed_status"], t["outcome"]) for t in out["tests"]}
    # caught before running by the static scan (os.write): tampered on both versions, never a pass
    assert statuses["test_unknown_status"] == ("tampered", "tampered", "both_fail")
    assert statuses["test_honest"] == ("tampered", "tampered", "both_fail")  # the scan is per file


@pytest.mark.slow
def test_the_json_of_the_real_command_carries_each_files_flag(files, tmp_path: Path) -> None:
    """`python -m evalmislead_assets.cli score --json` as a user runs it: a file inside the subset says so, and a
    file outside says why, here a name the code under test imports (its `import os`, taken by the star import)."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}

    def score(tests: str) -> dict:
        files["tests"].write_text(tests)
        proc = subprocess.run([sys.executable, "-m", "evalmislead_assets.cli", *_args(files, "--json")], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    files["buggy"].write_text("import os\n\n" + BUGGY)
    star = "from solution import *\n\n\ndef test_keeps_positives():\n    assert get_positive([-1, 2]) == [2]\n"
    out = score(star)
    assert (out["verified"], out["unverified_reason"]) == (False, "takes os from solution, which imports os")
    assert [(t["buggy_status"], t["fixed_status"]) for t in out["tests"]] == [("failed", "passed")]
    files["buggy"].write_text(BUGGY)
    out = score(star)
    assert (out["verified"], out["unverified_reason"]) == (True, None)
