"""The cross-model assets: every model's rates and comparisons side by side, the paper-style
average over the study's models, the size table, and the models report.

Each reads every model's test_outcomes, test_generations and generated_tests through the IO manager (one
input per model and table, so the lineage to each model's assets is the code's own); the logic is
analysis/cross_model.py. Built from the study (definitions.py): with one model they hold that model.
"""


import pandas as pd
from dagster import AssetExecutionContext, AssetIn, AssetsDefinition, MaterializeResult, MetadataValue, Output, asset

from evalmislead_assets import settings
from evalmislead_assets.analysis import cross_model
from evalmislead_assets.assets.analysis_inputs import (
    OUTCOME_COLUMNS,
    UPSTREAM,
    plan_code_version,
    say_notes,
    study_plan,
)
from evalmislead_assets.jobs import model_keys
from evalmislead_assets.report.build import to_html
from evalmislead_assets.report.formatting import md_table
from evalmislead_assets.report.sections import models as models_section
from evalmislead_assets.report.sections import replication_average
from evalmislead_assets.store.schema import MODEL_COLUMN
from evalmislead_assets.study.models import Study

GROUP = "models"
TABLES = ("test_outcomes", "test_generations", "generated_tests")


def _columns(table: str) -> list[str]:
    if table == "test_outcomes":
        return [*OUTCOME_COLUMNS, MODEL_COLUMN]
    return [*(UPSTREAM[table].metadata or {})["columns"], MODEL_COLUMN]


def _ins(study: Study) -> dict[str, AssetIn]:
    return {f"{m.key}__{t}": AssetIn(key=model_keys(study, [t], m)[0], metadata={"columns": _columns(t)})
            for m in study.models for t in TABLES}


def _frames(study: Study, inputs: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """{table: every model's rows}."""
    return {t: pd.concat([inputs[f"{m.key}__{t}"] for m in study.models], ignore_index=True) for t in TABLES}


def sizes(study: Study) -> dict[str, str]:
    """The size table's models: those of the first model's family (study.toml or the bundled default) with a size."""
    family = study.models[0].family
    return {m.name: m.parameters for m in study.models if m.parameters and m.family == family}


def build(study: Study) -> list[AssetsDefinition]:
    ins = _ins(study)
    names = study.names
    version = plan_code_version()

    @asset(name="model_rates", group_name=GROUP, ins=ins, code_version=version,
           description="Each model's condition_rates side by side (the four cells, rates with intervals).")
    def model_rates(context: AssetExecutionContext, **inputs: pd.DataFrame) -> Output[pd.DataFrame]:
        f = _frames(study, inputs)
        df = cross_model.per_model_rates(f["test_outcomes"], f["test_generations"], f["generated_tests"],
                                         study_plan(), names)
        return Output(df, metadata={"models": MetadataValue.json(names), "rows": len(df)})

    @asset(name="model_comparisons", group_name=GROUP, ins=ins, code_version=version,
           description="Each model's primary comparisons side by side (paired bootstrap per model).")
    def model_comparisons(context: AssetExecutionContext, **inputs: pd.DataFrame) -> Output[pd.DataFrame]:
        f = _frames(study, inputs)
        df, notes = cross_model.per_model_comparisons(f["test_outcomes"], f["test_generations"], f["generated_tests"],
                                                      study_plan(), names)
        say_notes(context.log.warning, context.log.info, notes, f["test_generations"])
        return Output(df, metadata={"models": MetadataValue.json(names), "rows": len(df),
                                    "skipped": MetadataValue.json(notes)})

    @asset(name="model_average", group_name=GROUP, ins=ins, code_version=version,
           description="The paper-style average over the study's models: pooled and mean of per-model rates, with a "
                       "paired bootstrap that resamples the same problems for every model.")
    def model_average(context: AssetExecutionContext, **inputs: pd.DataFrame) -> Output[pd.DataFrame]:
        f = _frames(study, inputs)
        df = cross_model.cross_model_average(f["test_outcomes"], f["test_generations"], f["generated_tests"],
                                             study_plan(), names)
        shown = df[df["kind"] == "comparison"][["thinking", "comparison_id", "metric", "condition_a", "condition_b",
                                                "n_models", "n_problems", "pooled", "pooled_ci_low", "pooled_ci_high",
                                                "mean", "mean_ci_low", "mean_ci_high"]]
        return Output(df, metadata={"models": MetadataValue.json(names), "rows": len(df),
                                    "not_estimable": int((~df["estimable"].astype(bool)).sum()) if len(df) else 0,
                                    "comparisons": MetadataValue.md(md_table(shown.round(4)))})

    @asset(name="model_sizes", group_name=GROUP, ins={"model_rates": AssetIn()}, code_version=version,
           description="The size table: the models of one family (study.toml) by parameter count, rates per "
                       "condition (thinking off).")
    def model_sizes(context: AssetExecutionContext, model_rates: pd.DataFrame) -> Output[pd.DataFrame]:
        chosen = sizes(study)
        df = cross_model.size_table(model_rates, chosen)
        return Output(df, metadata={"sizes": MetadataValue.json(chosen), "rows": len(df)})

    @asset(name="models_report", group_name=GROUP,
           ins={t: AssetIn() for t in models_section.TABLES},
           code_version=version,
           description="The report's 'Models side by side' section as its own file (report/models.md, .html).")
    def models_report(context: AssetExecutionContext, **frames: pd.DataFrame) -> MaterializeResult:
        replication = (replication_average.section(frames["model_average"], names) if study.prefixed else None)
        text = models_section.render_markdown(frames, replication)
        out = settings.report_dir()
        out.mkdir(parents=True, exist_ok=True)
        md_path, html_path = out / "models.md", out / "models.html"
        md_path.write_text(text, encoding="utf-8")
        html_path.write_text(to_html(text), encoding="utf-8")
        return MaterializeResult(metadata={"report": MetadataValue.md(text), "markdown": MetadataValue.path(str(md_path)),
                                           "html": MetadataValue.path(str(html_path)),
                                           "models": MetadataValue.json(names)})

    return [model_rates, model_comparisons, model_average, model_sizes, models_report]
