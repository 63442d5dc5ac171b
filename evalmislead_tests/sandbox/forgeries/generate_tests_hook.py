# pytest calls a pytest_generate_tests defined in the test module with a Metafunc, whose definition is a
# pytest node: listchain() reaches the session and every plugin.
from solution import get_positive


def pytest_generate_tests(metafunc):
    metafunc.definition.listchain()


def test_forged():
    assert get_positive([1]) == [-1]
