"""The cross-language assets: ``language_comparisons`` (every model's languages side by side, paired
on problem_idx) and ``languages_report`` (the report section as its own file, report/languages.md and .html).

Built only for a study of several languages (definitions.py). Each reads every model's test_outcomes and
generated_tests of every language through the IO manager (one input per model, language and table, so the
lineage to each language's branch is the code's own); the logic is analysis/language_comparison.py.
"""

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, AssetsDefinition, MaterializeResult, MetadataValue, asset

from evalmislead_assets import settings
from evalmislead_assets.analysis.language_comparison import language_comparisons as compare_languages
from evalmislead_assets.assets.analysis_inputs import plan_code_version, study_plan
from evalmislead_assets.assets.model_scope import language_key
from evalmislead_assets.report.build import to_html
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.report.sections import languages as languages_section
from evalmislead_assets.study.models import Study

GROUP = "languages"
COLUMNS = {"test_outcomes": ["condition", "thinking", "problem_idx", "outcome"],
           "generated_tests": ["condition", "thinking", "problem_idx"]}


def _input(model_key: str, language: str, table: str) -> str:
    return f"{model_key}__{language}__{table}"


def build(study: Study) -> list[AssetsDefinition]:
    if len(study.languages) < 2:
        return []
    ins = {_input(m.key, lang, t): AssetIn(key=language_key(study, m, lang, t), metadata={"columns": cols})
           for m in study.models for lang in study.languages for t, cols in COLUMNS.items()}

    @asset(name="language_comparisons", group_name=GROUP, ins=ins, code_version=plan_code_version(),
           description="Each model's languages side by side: misleading and effective rate per condition, language "
                       "a minus b with the paired bootstrap over the problems both answered (98.75 %); coverage "
                       "and mutation not estimable for Java and JavaScript, with why.")
    def language_comparisons(context: AssetExecutionContext,
                             **inputs: pd.DataFrame):  # MaterializeResult with a value
        plan = study_plan()
        frames = []
        for m in study.models:
            tables = {t: pd.concat([inputs[_input(m.key, lang, t)].assign(language=lang)
                                    for lang in study.languages], ignore_index=True) for t in COLUMNS}
            frames.append(compare_languages(tables["test_outcomes"], tables["generated_tests"],
                                            list(study.languages), m.name, plan))
        df = pd.concat(frames, ignore_index=True)
        rates = df[df["metric"].isin(["misleading_rate", "effective_rate"])]
        shown = rates[["model_name", "thinking", "condition", "metric", "language_a", "language_b", "rate_a",
                       "rate_b", "estimate", "ci_low", "ci_high", "n_problems", "note"]]
        return MaterializeResult(value=df, metadata={
            "rows": len(df), "estimable": int(df["estimable"].fillna(False).sum()),
            "languages": MetadataValue.json(list(study.languages)),
            "comparisons": MetadataValue.md(md_table(shown.round(4))),
        })

    @asset(name="languages_report", group_name=GROUP, code_version=plan_code_version(),
           ins={"language_comparisons": AssetIn()},
           description="The report's 'Languages side by side' section as its own file (report/languages.md, .html).")
    def languages_report(context: AssetExecutionContext, language_comparisons: pd.DataFrame) -> MaterializeResult:
        text = "\n".join([f"# {languages_section.TITLE}", "", *languages_section.render(
            {"language_comparisons": language_comparisons})]) + "\n"
        out = settings.report_dir()
        out.mkdir(parents=True, exist_ok=True)
        md_path, html_path = out / "languages.md", out / "languages.html"
        md_path.write_text(text, encoding="utf-8")
        html_path.write_text(to_html(text), encoding="utf-8")
        return MaterializeResult(metadata={"report": MetadataValue.md(text),
                                           "markdown": MetadataValue.path(str(md_path)),
                                           "html": MetadataValue.path(str(html_path))})

    return [language_comparisons, languages_report]
