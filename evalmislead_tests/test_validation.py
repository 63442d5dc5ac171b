import pytest

from evalmislead_assets import problems, validation


def test_oracle_pass_needs_the_mark_not_just_exit_zero() -> None:
    ok = validation.run_oracle("def f(x):\n    return x\n", "def check(f):\n    assert f(1) == 1\ncheck(f)", "f")
    assert ok.passed
    sneaky = validation.run_oracle("import sys\ndef f(x):\n    sys.exit(0)\n", "def check(f):\n    f(1)\ncheck(f)", "f")
    assert not sneaky.passed
    wrong = validation.run_oracle("def f(x):\n    return 2\n", "def check(f):\n    assert f(1) == 1\ncheck(f)", "f")
    assert not wrong.passed and "AssertionError" in wrong.detail


def test_oracle_times_out_an_endless_loop() -> None:
    res = validation.run_oracle("def f():\n    while True: pass\n", "f()", "f", timeout_s=1.0)
    assert not res.passed and res.detail.startswith("timeout")


@pytest.mark.slow
def test_all_164_pairs_validate(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_HOME", str(tmp_path))
    df = problems.load_problems()
    result = validation.validate(df)
    assert len(result) == 164
    assert result["valid"].all(), result[~result["valid"]][["task_id", "buggy_detail", "fixed_detail"]]
    # the buggy versions that loop forever were stopped by the timeout, not waited for
    assert result["buggy_detail"].str.startswith("timeout").any()
