"""One name per method: a condition's rate interval is the "cluster-adjusted Wilson interval" in the console
summary, the report, the README's generated Results and the docs; "bootstrap" names only the paired bootstrap
of the four comparisons. The proposed replacement (an amendment not yet adopted) is the "problem-weighted Wilson
interval" wherever it is named, and no reader-facing place prints it as the study's rate interval."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "cluster-adjusted Wilson interval"
# where a rate interval is named for a reader: the console, the report, the README's generated part, the docs
NAMING = ("evalmislead_assets/cli/summary.py", "evalmislead_assets/report/build.py",
          "evalmislead_assets/report/results.py", "evalmislead_assets/report/plots.py", "docs/analysis.md")
# the generated Results (rates with their intervals) live in one of these
RESULTS = ("README.md", "docs/results.md")
# the proposed rate interval (prompts/analysis_plan_changes.md, proposed) and where it is described
PROPOSED = "problem-weighted Wilson interval"
PROPOSED_IN = ("evalmislead_assets/analysis/rate_interval.py", "benchmarks/bench_interval_coverage.py",
               "docs/analysis.md", "prompts/analysis_plan_changes.md")
# the proposed interval under another spelling: "problem weighted Wilson", "problem-weighted Wilson bound"
PROPOSED_VARIANT = re.compile(r"\bproblem[ -]weighted\s+wilson\b(?!\s+interval)|\bproblem\s+weighted\b", re.IGNORECASE)
# a bootstrap interval that is not the comparisons' paired one
OTHER_NAME = re.compile(r"(?<!paired )(?<!paired-)(?<!percentile )bootstrap\s+(confidence\s+)?intervals?\b",
                        re.IGNORECASE)


def _text(path: Path) -> str:
    """The file with its line breaks and string-literal seams folded, so a name split over two lines is found."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"\"\s*\n\s*(?:\+\s*)?f?\"", "", text)  # "... 98.75 % bootstrap "\n  "interval" -> one string
    return re.sub(r"\s+", " ", text)


def _checked() -> list[Path]:
    paths = [*sorted((ROOT / "evalmislead_assets").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")),
             ROOT / "README.md"]
    return [p for p in paths if "__pycache__" not in p.parts]


def test_each_reader_facing_place_names_the_rate_interval():
    missing = [name for name in NAMING if NAME.lower() not in _text(ROOT / name).lower()]
    assert not missing, f"these do not name the rate interval {NAME!r}: {missing}"
    results = [name for name in RESULTS if (ROOT / name).exists()]
    assert any(NAME.lower() in _text(ROOT / name).lower() for name in results), (
        f"the generated Results ({' or '.join(results)}) do not name the rate interval {NAME!r}")


def test_no_rate_interval_is_called_a_bootstrap_interval():
    found = [f"{p.relative_to(ROOT)}: ...{m.string[max(0, m.start() - 60):m.end()]}"
             for p in _checked() for m in OTHER_NAME.finditer(_text(p))]
    assert not found, "a rate interval named otherwise than the " + NAME + ":\n" + "\n".join(found)


def test_the_check_sees_a_name_split_over_two_string_literals():
    """Not vacuous: the console's old wording, split as it was over two literals, is found."""
    text = '    out += [f"Per condition (rate = cell; 98.75 % bootstrap "\n            "interval):"]\n'
    folded = re.sub(r"\s+", " ", re.sub(r"\"\s*\n\s*(?:\+\s*)?f?\"", "", text))
    assert OTHER_NAME.search(folded)
    assert not OTHER_NAME.search("the difference with its 98.75 % paired-bootstrap interval over problems")


def test_the_proposed_interval_has_one_name_and_is_not_printed_as_the_rate_interval():
    missing = [name for name in PROPOSED_IN if PROPOSED.lower() not in _text(ROOT / name).lower()]
    assert not missing, f"these do not name the proposed interval {PROPOSED!r}: {missing}"
    paths = [*_checked(), ROOT / "benchmarks" / "bench_interval_coverage.py", ROOT / "prompts" / "analysis_plan_changes.md"]
    variants = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in paths for m in PROPOSED_VARIANT.finditer(_text(p))]
    assert not variants, f"the proposed interval is called {PROPOSED!r}:\n" + "\n".join(variants)
    # until the amendment is adopted, the places that print a rate interval print the cluster-adjusted one only
    printed = [name for name in (*NAMING[:-1], *RESULTS) if PROPOSED.lower() in _text(ROOT / name).lower()]
    assert not printed, f"these print the proposed interval as the study's rate interval: {printed}"


def test_the_proposed_name_check_sees_a_variant():
    """Not vacuous: another spelling of the proposed name is found; the name itself and the code's are not."""
    assert PROPOSED_VARIANT.search("with its problem weighted Wilson interval")
    assert PROPOSED_VARIANT.search("the problem-weighted Wilson bound")
    assert not PROPOSED_VARIANT.search(f"the {PROPOSED} (problem_weighted_wilson)")
