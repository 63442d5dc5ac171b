"""Report sections contributed by other modules, listed in one place.

Each section names the tables it reads and a render function from those frames to
Markdown lines; `build.load_data` reads the tables and `build.build` appends the
sections, in this order, after the core sections. Every table a section names must be
one of the report's inputs (inputs.INPUTS), else loading the report fails naming it. A
section whose tables have no rows gets empty frames and must say so itself (never a
number drawn from no rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

Frames = dict[str, pd.DataFrame]


@dataclass(frozen=True)
class Section:
    title: str
    tables: tuple[str, ...]
    render: Callable[[Frames], list[str]]


def sections() -> list[Section]:
    """The extra sections, in report order (imports are local so that each module stays optional)."""
    out: list[Section] = []
    from evalmislead_assets.report.sections import problem_level, repetition

    out.append(Section(problem_level.TITLE, problem_level.TABLES, problem_level.render))
    out.append(Section(repetition.TITLE, repetition.TABLES, repetition.render))
    from evalmislead_assets.report.sections import determinism

    out.append(Section(determinism.TITLE, determinism.SECTION_TABLES, determinism.section))
    from evalmislead_assets.report.sections import coverage as coverage_report

    out.append(Section(coverage_report.TITLE, coverage_report.TABLES, coverage_report.render))
    from evalmislead_assets.report.sections import collected_not_scored as collection_report

    out.append(Section(collection_report.TITLE, collection_report.TABLES, collection_report.render))
    from evalmislead_assets.report.sections import mutation_score as mutation_report

    out.append(Section(mutation_report.TITLE, mutation_report.TABLES, mutation_report.section))
    from evalmislead_assets.report.sections import tampering as report_tampering

    out.append(Section(report_tampering.TITLE, report_tampering.TABLES, report_tampering.render))
    from evalmislead_assets.report.sections import runner_limits as limits_report

    out.append(Section(limits_report.TITLE, limits_report.TABLES, limits_report.render))
    from evalmislead_assets.report.sections import verified as verified_report

    out.append(Section(verified_report.TITLE, verified_report.TABLES, verified_report.render))
    from evalmislead_assets.report.sections import tool_policy as tool_policy_report

    out.append(Section(tool_policy_report.TITLE, tool_policy_report.TABLES, tool_policy_report.render))
    from evalmislead_assets.report.sections import replication

    out.append(Section("Replication (direction only)", replication.TABLES, replication.section))
    return out


def tables() -> list[str]:
    return sorted({t for s in sections() for t in s.tables})
