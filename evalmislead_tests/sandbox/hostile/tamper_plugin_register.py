# Registers a plugin through the plugin manager whose makereport wrapper turns every call into a pass.
import pytest


class Forger:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome = "passed"
        report.longrepr = None


def test_forges_its_own_pass(request):
    request.config.pluginmanager.register(Forger(), "forger")
    assert False
