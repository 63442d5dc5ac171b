"""What `evalmislead run` materializes, read off the definitions: no list of asset names is kept here.

The asset graph says everything the plan needs. Each asset's definition metadata names its model
(``evalmislead/model``) and language (``evalmislead/language``, definitions.py); its partitions definition
says whether it runs per thinking mode, per condition x thinking mode, or once. From that:

1. the model-free inputs (no model, and nothing upstream of them belongs to a model): one run;
2. per model, per language of the study (Python first): a run per thinking mode of its thinking-partitioned
   assets (the model-written specs), a run per condition x thinking mode of its condition-partitioned ones
   (the chain), then one run of its unpartitioned ones (the analysis and the report);
3. everything else (the assets that set models or languages side by side): one run.

Assets tagged ``evalmislead/optional`` (the mutation steps) are left out unless the run asks for them.
Adding an asset to a module the definitions load, with its model's metadata and partitions, is all it takes
for `evalmislead run` to materialize it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetKey, MultiPartitionsDefinition, StaticPartitionsDefinition

from evalmislead_assets.dagster_metadata import LANGUAGE_METADATA, MODEL_METADATA, OPTIONAL_TAG

INPUTS, CHAIN, ANALYSIS, ACROSS = "inputs", "chain", "analysis", "across"


@dataclass(frozen=True)
class Step:
    """One Dagster run of the plan: its assets, its partition (None: unpartitioned), and for the console the
    model, language and stage it belongs to."""

    keys: tuple[AssetKey, ...]
    partition: str | None = None
    model: str | None = None
    language: str | None = None
    stage: str = ACROSS

    @property
    def specs_only(self) -> bool:
        """The step writes the model's specs only (a thinking mode's run before the chain)."""
        return {k.path[-1] for k in self.keys} == {"model_specs"}

    @property
    def label(self) -> str:
        """A short name of the step for a failure line (``chain [buggy_code|off]``, ``java/model_specs [off]``)."""
        if self.stage == CHAIN:
            what = "model_specs" if self.specs_only else "chain"
            lang = f"{self.language}/" if self.language and self.language != "python" else ""
            return f"{lang}{what} [{self.partition}]"
        return self.stage


@dataclass
class Plan:
    """The steps of one `evalmislead run`, in the order they run, and the optional steps it leaves out."""

    steps: list[Step] = field(default_factory=list)
    left_out: dict[str, list[AssetKey]] = field(default_factory=dict)

    def of_model(self, model: str) -> list[Step]:
        return [s for s in self.steps if s.model == model]

    @property
    def inputs(self) -> list[Step]:
        return [s for s in self.steps if s.stage == INPUTS]

    @property
    def across(self) -> list[Step]:
        return [s for s in self.steps if s.stage == ACROSS]


def _dims(partition: str, pdef: Any) -> dict[str, str]:
    """A partition key's dimensions by name ({'thinking': 'off'} for a plain thinking key)."""
    if isinstance(pdef, MultiPartitionsDefinition):
        names = [d.name for d in pdef.partitions_defs]
        return dict(zip(names, partition.split("|"), strict=True))
    return {"thinking": partition}


def partitions_for(pdef: Any, modes: Sequence[str], conditions: Sequence[str]) -> list[str]:
    """The partition keys of ``pdef`` this run asks for, thinking mode first, then condition, in the order given."""
    if not isinstance(pdef, (MultiPartitionsDefinition, StaticPartitionsDefinition)):
        raise ValueError(f"a partitions definition evalmislead run cannot choose from: {type(pdef).__name__}")
    wanted = {"thinking": list(modes), "condition": list(conditions)}
    keys = []
    for key in pdef.get_partition_keys():
        dims = _dims(key, pdef)
        if all(v in wanted.get(d, [v]) for d, v in dims.items()):
            keys.append(key)
    order = {d: {v: i for i, v in enumerate(vals)} for d, vals in wanted.items()}
    return sorted(keys, key=lambda k: tuple(order[d][v] for d, v in sorted(_dims(k, pdef).items(),
                                                                            key=lambda dv: dv[0] != "thinking")))


def _metadata_value(node: Any, name: str) -> str | None:
    value = node.metadata.get(name)
    if value is None:
        return None
    return str(getattr(value, "value", value))


def build_plan(asset_graph: Any, models: Sequence[str], languages: Sequence[str], modes: Sequence[str],
               conditions: Sequence[str], optional: Iterable[str] = ()) -> Plan:
    """The run's steps from ``asset_graph`` (a resolved Dagster asset graph): ``models`` and ``languages`` in the
    study's order, the thinking ``modes`` and ``conditions`` asked for, and the optional parts asked for
    (``optional``: values of the ``evalmislead/optional`` tag, e.g. 'mutation')."""
    wanted = set(optional)
    plan = Plan()
    nodes = {k: asset_graph.get(k) for k in asset_graph.materializable_asset_keys}
    chosen: dict[AssetKey, Any] = {}
    for key, node in nodes.items():
        part = node.tags.get(OPTIONAL_TAG)
        if part and part not in wanted:
            plan.left_out.setdefault(part, []).append(key)
        else:
            chosen[key] = node
    model_of = {k: _metadata_value(n, MODEL_METADATA) for k, n in chosen.items()}
    language_of = {k: _metadata_value(n, LANGUAGE_METADATA) for k, n in chosen.items()}

    position = {k: i for i, k in enumerate(asset_graph.toposorted_asset_keys)}

    def ordered(keys: Iterable[AssetKey]) -> tuple[AssetKey, ...]:
        """In dependency order (the order Dagster runs them in), ties by name."""
        return tuple(sorted(keys, key=lambda k: (position.get(k, 0), k.to_user_string())))

    # the model-free inputs: no model, and no model upstream
    model_bound: set[AssetKey] = {k for k, m in model_of.items() if m is not None}
    inputs: set[AssetKey] = set()
    for key in asset_graph.toposorted_asset_keys:
        if key in chosen and key not in model_bound:
            if not (_upstream(asset_graph, key) & model_bound):
                inputs.add(key)
    unknown = sorted({m for m in model_of.values() if m is not None} - set(models))
    if unknown:
        raise ValueError(f"assets of model(s) {', '.join(unknown)} that the study does not name")
    if inputs:
        plan.steps.append(Step(ordered(inputs), stage=INPUTS))
    handled: set[AssetKey] = set(inputs)
    for model in models:
        for language in languages:
            mine = [k for k in chosen if model_of[k] == model and (language_of[k] or "python") == language]
            handled.update(mine)
            by_pdef: dict[Any, list[AssetKey]] = {}
            for key in mine:
                by_pdef.setdefault(chosen[key].partitions_def, []).append(key)
            partitioned = [(pdef, keys) for pdef, keys in by_pdef.items() if pdef is not None]
            # per thinking mode: the thinking-only assets (they feed the chain), then each condition's chain
            for mode in modes:
                for pdef, keys in sorted(partitioned, key=lambda pk: isinstance(pk[0], MultiPartitionsDefinition)):
                    for pkey in partitions_for(pdef, [mode], conditions):
                        plan.steps.append(Step(ordered(keys), pkey, model, language, CHAIN))
            if by_pdef.get(None):
                plan.steps.append(Step(ordered(by_pdef[None]), None, model, language, ANALYSIS))
    # a model's asset with no partition asked for (no condition chosen) is handled, not left over
    planned = handled | {k for s in plan.steps for k in s.keys}
    rest = [k for k in chosen if k not in planned]
    if rest:
        partitioned_rest = [k.to_user_string() for k in rest if chosen[k].partitions_def is not None]
        if partitioned_rest:
            raise ValueError(f"partitioned asset(s) without a model: {', '.join(sorted(partitioned_rest))}")
        plan.steps.append(Step(ordered(rest), stage=ACROSS))
    return plan


def _upstream(asset_graph: Any, key: AssetKey) -> set[AssetKey]:
    """Every asset upstream of ``key`` (its ancestors)."""
    seen: set[AssetKey] = set()
    todo = list(asset_graph.get(key).parent_keys)
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        todo.extend(asset_graph.get(k).parent_keys)
    return seen
