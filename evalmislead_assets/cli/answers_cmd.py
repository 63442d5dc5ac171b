"""`evalmislead answers export|import|show`: a study's answers as a shippable pack, and back (llm/answer_pack.py).

    evalmislead answers export DIR [--append] [--model NAME]   llm_cache -> pack (--append: new shards only)
    evalmislead answers import DIR                             pack -> llm_cache, after checking every request
    evalmislead answers show DIR                               the pack's manifest in a few lines

Import refuses, in one line naming the first difference, a pack whose request bodies differ from what the
current prompts and study settings would send; nothing is written then. A replay from an imported pack
sends no request: every answer is a cache hit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import subprocess
from pathlib import Path
from typing import Any

from evalmislead_assets import settings, study_models
from evalmislead_assets.analysis.spec_labels import JUDGE_TEMPLATE
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.llm import answer_pack, embedded_model, prompts
from evalmislead_assets.study.models import ModelSpec

HELP = "Export a study's answers as a pack, import a pack into llm_cache (checked against the prompts), or show one."

BUNDLED_PACKS = Path(__file__).resolve().parents[1] / "data" / "answers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["export", "import", "show"])
    p.add_argument("folder", help="the pack folder")
    p.add_argument("--append", action="store_true", help="export: add only answers not in the pack yet (new shards)")
    p.add_argument("--model", default="", help="export: the study model whose answers to pack (default: the first)")
    p.add_argument("--db", default="", help="DuckDB file (default: EVALMISLEAD_DB or the project's)")


def run(args: argparse.Namespace) -> int:
    folder = Path(args.folder).expanduser()
    if args.action == "show":
        print("\n".join(describe(folder)))
        return 0
    from evalmislead_assets.store.database import Warehouse

    db = Path(args.db).expanduser() if args.db else settings.db_path()
    if args.action == "import":  # it writes llm_cache and parses the dataset into the data folder's cache
        from evalmislead_assets.config_check import check_data_folder, check_db_path

        check_db_path(db)
        check_data_folder()
    wh = Warehouse(db)
    try:
        if args.action == "export":
            spec = _model(args.model)
            added, total = export(wh, folder, spec, append=args.append)
            print(f"evalmislead: {added} answers added to {folder} ({total} in the pack)")
        else:
            added, there = import_pack(wh, folder)
            print(f"evalmislead: imported {added} answers from {folder} into llm_cache ({there} already there)")
    except answer_pack.PackError as exc:
        raise ConfigError(str(exc)) from None
    return 0


def _model(name: str) -> ModelSpec:
    study = study_models.study()
    if not name:
        return study.models[0]
    for m in study.models:
        if m.name == name:
            return m
    raise ConfigError(f"model {name!r} is not in the study ({study.source}); choose from {', '.join(study.names)}")


def alias_of(spec: ModelSpec) -> str:
    from evalmislead_assets.resources.llm import _alias

    return _alias(spec)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=settings.PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance(spec: ModelSpec, alias: str) -> dict[str, Any]:
    folder = settings.prompts_dir()
    names = (f"{prompts.SPEC_TEMPLATE}.md", f"{prompts.TEST_TEMPLATE}.md", f"{JUDGE_TEMPLATE}.md")
    templates = {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names if (folder / n).is_file()}
    bundled = embedded_model.BUNDLED.get(spec.bundled) if spec.bundled else None
    return {
        "model": alias, "study_model": spec.name, "model_file_sha256": bundled.sha256 if bundled else None,
        "model_file_bytes": bundled.size if bundled else None,
        "slots": spec.slots, "max_tokens_off": spec.max_tokens("off") or settings.max_tokens("off"),
        "max_tokens_on": spec.max_tokens("on") or settings.max_tokens("on"),
        "spec_max_tokens_off": spec.max_tokens("off", "model_specs") or settings.max_tokens("off"), "temperature": 0,
        "seed": 1234, "judge_max_tokens": settings.judge_max_tokens(), "prompt_templates_sha256": templates,
        "git_commit": _git_commit(), "written_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def current_answers(answers: list[dict[str, Any]], spec: ModelSpec, alias: str,
                    packed_specs: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], int]:
    """(the answers whose request is what the study sends now, how many others were left out): a data folder
    may hold answers asked under an older cap or template, which a pack of this study must not carry.
    ``packed_specs``: the spec answers a pack being appended to holds already (a model_spec answer is checked
    against its spec, which the data folder may no longer name: a recorder resumed on an imported pack)."""
    from evalmislead_assets.cli.pack_expectations import Expectations
    from evalmislead_assets.study.problems import load_problems

    problems = load_problems(source="local", cache_dir=settings.datasets_cache_dir())

    def matches(expect: Expectations, a: dict[str, Any]) -> bool:
        try:
            return expect.body(a) == a["request_json"]
        except LookupError:
            return False

    bare = Expectations(problems, [], spec, alias)
    specs = [a for a in answers if a.get("asset") == "model_specs" and matches(bare, a)]
    known = {a["cache_key"] for a in specs}
    expect = Expectations(problems, specs + [a for a in packed_specs or [] if a["cache_key"] not in known
                                             and matches(bare, a)], spec, alias)
    kept = specs + [a for a in answers if a.get("asset") != "model_specs" and matches(expect, a)]
    order = {a["cache_key"]: i for i, a in enumerate(answers)}
    kept.sort(key=lambda a: order[a["cache_key"]])
    return kept, len(answers) - len(kept)


def export(wh: Any, folder: Path, spec: ModelSpec, append: bool) -> tuple[int, int]:
    alias = alias_of(spec)
    packed = answer_pack.read_pack(folder).answers if append and answer_pack.read_manifest(folder) else []
    in_pack = {a["cache_key"] for a in packed}
    # answers the pack holds already are not checked again: one imported from it has no request log row
    # (asset, condition, task), so it could not be matched, and it would not be added anyway
    stored = [a for a in answer_pack.stored_answers(wh, alias) if a["cache_key"] not in in_pack]
    old_shared = (answer_pack.read_manifest(folder) or {}).get(answer_pack.SHARED, []) if packed else []
    if append and packed and not stored and old_shared == shared_requests(wh, packed):
        return 0, len(packed)
    answers, left_out = current_answers(stored, spec, alias, [a for a in packed if a.get("asset") == "model_specs"])
    if left_out:
        print(f"evalmislead: {left_out} stored answers of {alias} were asked under other prompts or settings than "
              "this study's and are left out of the pack")
    if not answers and not packed:
        raise ConfigError(f"{wh.path} holds no answer of model {alias} asked as this study asks; run the study first")
    props = answer_pack.props_documents(wh, [a.get("server_props_sha256") for a in answers])
    made = provenance(spec, alias)
    # the llama.cpp build: what /props said (b0-unknown for the bundled server), its --version, its package
    from evalmislead_assets.report.provenance import llama_cpp, llama_server_binary

    made["llama_cpp"] = llama_cpp(llama_server_binary(), [p.get("build_info") for p in props.values()])
    result = answer_pack.write_pack(folder, answers, props, made, append=append,
                                    shared=shared_requests(wh, packed + answers))
    study = study_models.study()
    if len(study.models) == 1 and Path(study.source).is_file():  # the replay's study file (run --replay)
        text = Path(study.source).read_text(encoding="utf-8")
        if not (folder / answer_pack.STUDY_FILE).is_file() or (folder / answer_pack.STUDY_FILE).read_text() != text:
            (folder / answer_pack.STUDY_FILE).write_text(text, encoding="utf-8")
    return result


def shared_requests(wh: Any, answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The generation requests the data folder answered with one of ``answers`` under other labels than the
    answer's own: two requests with the same body (one cache key), e.g. two problems with the same signature
    in ``signature_only``; the pack lists them so a replay counts those problems as answered."""
    keys = {a["cache_key"] for a in answers}
    if not keys or not wh.table_exists("test_generations"):
        return []
    fields = ("condition", "thinking", "task_id", "cache_key")  # not the asset: a model's prefix may name it
    own = {tuple(a.get(f) or ("off" if f == "thinking" else None) for f in fields) for a in answers}
    rows = wh.query_df("SELECT DISTINCT 'test_generations' AS asset, condition, thinking, task_id, cache_key "
                       "FROM test_generations WHERE cache_key = ANY(?) AND error IS NULL", [sorted(keys)],
                       read_only=True).to_dict("records")
    return [r for r in rows if tuple(r[f] for f in fields) not in own]


def check_pack(pack: answer_pack.Pack) -> ModelSpec:
    """The study model the pack belongs to, after checking every request body; a PackError names the first miss."""
    from evalmislead_assets.cli.pack_expectations import Expectations
    from evalmislead_assets.study.problems import load_problems

    study = study_models.study()
    wanted = pack.manifest.get("model")
    spec = next((m for m in study.models if alias_of(m) == wanted), None)
    if spec is None:
        raise answer_pack.PackError(
            f"pack {pack.folder} holds answers of {wanted}, which no model of the study ({study.source}: "
            f"{', '.join(alias_of(m) for m in study.models)}) answers as; add it to the study file")
    problems = load_problems(source="local", cache_dir=settings.datasets_cache_dir())
    expect = Expectations(problems, pack.answers, spec, str(wanted))
    for a in pack.labelled():  # a shared request's body is checked under its own labels too
        where = f"{a.get('asset')}[{a.get('condition') or '-'}|{a.get('thinking') or 'off'}] {a.get('task_id')}"
        try:
            body = expect.body(a)
        except LookupError as exc:
            raise answer_pack.PackError(f"pack {pack.folder} refused: {where}: {exc}") from None
        if body != a["request_json"]:
            diff = answer_pack.first_difference(a["request_json"], body)
            raise answer_pack.PackError(
                f"pack {pack.folder} refused: {where} was asked differently from what this study sends now "
                f"({diff}); the prompts or settings changed since it was recorded, so its answers are not replayed")
    return spec


def import_pack(wh: Any, folder: Path) -> tuple[int, int]:
    pack = answer_pack.read_pack(folder)
    check_pack(pack)
    return answer_pack.import_answers(wh, pack)


def describe(folder: Path) -> list[str]:
    m = answer_pack.read_manifest(folder)
    if m is None:
        raise ConfigError(f"{folder} holds no answer pack (manifest.json missing)")
    return [
        f"pack {folder}: {m.get('answers', 0)} answers of {m.get('model')} in {len(m.get('shards', []))} shards",
        f"model file sha256 {m.get('model_file_sha256')}; slots {m.get('slots')}; caps off={m.get('max_tokens_off')} "
        f"on={m.get('max_tokens_on')}; seed {m.get('seed')}; git {str(m.get('git_commit'))[:12]}",
        f"written {m.get('written_at')}",
    ]
