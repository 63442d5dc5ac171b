# What the rules by reach leave inside: a submodule of a pure module (collections.abc, json.decoder), a namedtuple
# with ordinary fields, a warnings filter on a builtin category, a static skipif on sys.version_info and a
# set-up hook that does not read what pytest passes it.
import json
import sys
from collections import abc, namedtuple

import pytest

from solution import get_positive

Case = namedtuple("Case", "given expected")
CASES = [Case([-1, 2], [2]), Case([], [])]


class TestPaths:
    def setup_method(self, method):
        self.cases = list(CASES)

    def test_cases(self):
        assert isinstance(self.cases, abc.Sequence)
        for case in self.cases:
            assert get_positive(case.given) == case.expected

    @pytest.mark.filterwarnings("ignore::DeprecationWarning")
    @pytest.mark.skipif(sys.version_info < (3, 0), reason="python 2")
    def test_json_round_trip(self):
        with pytest.raises(json.decoder.JSONDecodeError):
            json.loads("[")
        assert get_positive(json.loads("[-3, 4]")) == [4]
