"""How assets of other groups read the problems: the study's problems, and the columns the sandbox needs.

Shared inputs (like model_scope.py), so that no group's module imports another group's assets module.
"""

from dagster import AssetIn

# The study's problems (validated pairs in EVALMISLEAD_PROBLEMS, see study.problems.study_problems_from) are
# drawn from these two inputs by every asset that works per problem.
STUDY_PROBLEM_INS = {"problems": AssetIn(), "problem_validation": AssetIn(metadata={"columns": ["task_id", "valid"]})}

# the problem columns the sandbox needs (a projection of the problems input)
PROBLEM_COLUMNS = ["task_id", "problem_idx", "entry_point", "buggy_code", "fixed_code"]
PROBLEMS_IN = AssetIn("problems", metadata={"columns": PROBLEM_COLUMNS})
