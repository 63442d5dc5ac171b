# Only this run's own module folder is visible: no sibling version's solution.py to read the fix from.
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_only_own_solution_is_visible():
    found = []
    for dirpath, _dirs, files in os.walk(ROOT):
        found += [os.path.join(dirpath, f) for f in files if f == "solution.py"]
    assert found == [os.path.join(HERE, "solution.py")]
    assert sorted(os.listdir(ROOT)) == ["m", "w"]
