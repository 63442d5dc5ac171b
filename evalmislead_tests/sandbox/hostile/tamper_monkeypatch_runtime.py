# Patches pytest internals from inside a test (monkeypatch and plain setattr on a pytest class).
import _pytest.reports


def test_monkeypatches_report_outcome(monkeypatch):
    monkeypatch.setattr(_pytest.reports.BaseReport, "failed", property(lambda self: False))
    assert False


def test_setattr_on_report_class():
    _pytest.reports.TestReport.outcome = "passed"
    assert False
