"""How assets of other groups read the problems: the study's problems, and the columns the sandbox needs.

Shared inputs (like model_scope.py), so that no group's module imports another group's assets module.
"""

import pandas as pd
from dagster import AssetIn

from evalmislead_assets.study.problems import study_problems_from

# The study's problems (validated pairs in the study's subset, see study_problems below) are
# drawn from these two inputs by every asset that works per problem.
STUDY_PROBLEM_INS = {"problems": AssetIn(), "problem_validation": AssetIn(metadata={"columns": ["task_id", "valid"]})}


def study_problems(problems: pd.DataFrame, problem_validation: pd.DataFrame, subset: list[int] | None) -> pd.DataFrame:
    """The validated problems in ``subset`` (the study_settings resource's; None: all): what generation and mutants
    work on."""
    return study_problems_from(problems, problem_validation, subset)


# the problem columns the sandbox needs (a projection of the problems input)
PROBLEM_COLUMNS = ["task_id", "problem_idx", "entry_point", "buggy_code", "fixed_code"]
PROBLEMS_IN = AssetIn("problems", metadata={"columns": PROBLEM_COLUMNS})
