"""The study's models, read from the study file (study.toml): names, how each is reached, its settings.

Plain data (no Dagster). The file lists one ``[[models]]`` table per model::

    [[models]]
    name = "qwen2.5-coder-1.5b"       # short name: the `model_name` column of every per-model row
    bundled = "qwen2.5-coder-1.5b"    # a bundled GGUF by name (llm/embedded_model.py), or
    # gguf = "/models/other.gguf"     # another GGUF file, served by the embedded llama-server, or
    # urls = ["http://gpu:8080"]      # running OpenAI-compatible servers
    # slots = 2                       # parallel requests (the embedded server's slots)
    # chat_template_kwargs = {}       # added to every request's chat_template_kwargs
    # max_tokens_off = 768            # output caps for this model (else EVALMISLEAD_MAX_TOKENS_*)
    # max_tokens_on = 1024
    # spec_max_tokens_off = 512       # the spec request's cap, thinking off (else max_tokens_off): a docstring
    # parameters = "1.5B"             # size label for the size table (bundled models know theirs)
    # family = "Qwen2.5-Coder"        # models of one family form the size table
    # thinking = false                # can it think? false: thinking-on work is refused (bundled coders: false)
    # api_key_env = "OPENAI_API_KEY"  # a hosted endpoint's key: the variable is read at run time and sent as
    #                                 # "Authorization: Bearer ..."; never stored in a row, a cache key or a log
    # headers = {"X-Org" = "lab"}     # more HTTP headers for this model's server (not stored either)
    # api = "openai"                  # a hosted OpenAI-compatible endpoint: bodies without llama-server's own
    #                                 # fields (chat_template_kwargs, cache_prompt); default "llama.cpp"
    # api_model = "gpt-4o-mini"       # the model id sent in every body (urls only; else the server's alias)

Top level, the study's own settings: ``problems = "0-9,30"`` (or a list of numbers; EVALMISLEAD_PROBLEMS and
``evalmislead run --problems`` override it), and ``languages = ["python", "java", "js"]`` (default
``["python"]``): the HumanEvalPack splits the study runs (docs/languages.md).

An optional ``[execution]`` table says where the sandboxed test runs go (``parse_execution``; docs/distributed.md)::

    [execution]
    dask_scheduler = "tcp://10.0.0.5:8786"  # the sandbox's batches go to this Dask cluster
    answers_per_task = 4                     # answer files per Dask task (default DEFAULT_ANSWERS_PER_TASK)

A study of one model keeps the asset keys unprefixed (``test_generations``); with several, each
model's assets are prefixed with its key (``qwen2_5_coder_1_5b/test_generations``). Python keeps those keys;
every other language's assets carry the language inside the model's prefix (``java/test_generations``,
``qwen2_5_coder_1_5b/js/test_generations``).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalmislead_assets.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KEYS = {"name", "bundled", "gguf", "urls", "slots", "chat_template_kwargs", "max_tokens_off", "max_tokens_on",
         "spec_max_tokens_off",
         "parameters", "family", "thinking", "thinking_off", "api_key_env", "headers", "api", "api_model"}
# How a thinking-off request switches thinking off (``thinking_off`` of a [[models]] entry; docs/own-model.md):
# "template" sends chat_template_kwargs.enable_thinking = false, which Qwen3-style chat templates honour;
# "prefill" adds an assistant prefill that the server opens the answer with, after an empty reasoning block
# (R1-style templates, which ignore the flag); "budget0" asks llama-server for a reasoning budget of 0 tokens.
THINKING_OFF = ("template", "prefill", "budget0")
DEFAULT_THINKING_OFF = "template"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


# The languages a study can run: Python (the study as fixed in PROTOCOL.md) and the two other HumanEvalPack
# splits with a chain of their own (evalmislead_assets/polyglot/). Python is the default and keeps today's keys.
LANGUAGES: tuple[str, ...] = ("python", "java", "js")
DEFAULT_LANGUAGE = "python"
LANGUAGE_NAMES = {"python": "Python", "java": "Java", "js": "JavaScript"}


_EXECUTION_KEYS = ("dask_scheduler", "answers_per_task")
# Answer files per Dask task. A task adds ~17 ms (benchmarks/bench_dask_pool.py: the round trip, pickling, the
# hand-over to a warm zygote), ~2 % of one answer file's runs: four files keep it near 0.5 %, and tasks stay small
# enough that the cluster's threads finish a batch together (docs/distributed.md).
DEFAULT_ANSWERS_PER_TASK = 4


class StudyError(ConfigError):
    """A bad study file or model selection; the message is one line naming the fix."""


def model_key(name: str) -> str:
    """A model name as an asset-key prefix: every character but letters, digits and '_' becomes '_'."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    bundled: str = ""
    gguf: str = ""
    urls: tuple[str, ...] = ()
    slots: int | None = None
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_tokens_off: int | None = None
    max_tokens_on: int | None = None
    spec_max_tokens_off: int | None = None  # the model_specs request's cap with thinking off (else max_tokens_off)
    parameters: str = ""
    family: str = ""
    thinking: bool | None = None  # None: not declared (thinking-on work is allowed, and checked per answer)
    thinking_default: str = ""  # where ``thinking`` comes from when the study file does not say (a bundled model)
    api_key_env: str = ""  # the variable holding the endpoint's key (its value is read only when sending)
    headers: Mapping[str, str] = field(default_factory=dict)
    api: str = "llama.cpp"  # the request body's flavour: "openai" for a hosted endpoint (no llama-server fields)
    api_model: str = ""  # the model id every request names (a hosted endpoint's); else the server's alias
    thinking_off: str = DEFAULT_THINKING_OFF  # how thinking-off requests switch thinking off (THINKING_OFF)

    @property
    def key(self) -> str:
        """The asset-key prefix and group name: the name with every other character as '_'."""
        return model_key(self.name)

    def max_tokens(self, thinking: str, asset: str = "") -> int | None:
        if asset == "model_specs" and thinking == "off" and self.spec_max_tokens_off:
            return self.spec_max_tokens_off
        return self.max_tokens_off if thinking == "off" else self.max_tokens_on

    def refuse_thinking(self, mode: str, source: str) -> None:
        """One line when thinking-on work is asked of a model that declares it cannot think."""
        if mode == "on" and self.thinking is False:
            said = self.thinking_default or f"thinking = false in its [[models]] entry in {source}"
            raise StudyError(f"model {self.name} cannot think ({said}): thinking-on work is refused; run thinking "
                             "off, or give a model with a thinking mode thinking = true in the study file")

    def reach(self) -> str:
        if self.urls:
            return ",".join(self.urls)
        return f"bundled {self.bundled}" if self.bundled else f"GGUF {self.gguf}"


@dataclass(frozen=True)
class Reach:
    """Where one model's requests go and where that came from, for messages: ``urls`` from ``origin``
    (e.g. "EVALMISLEAD_LLM_URL", "model m in study file study.toml"), or no urls: the embedded
    llama-server with ``served`` (e.g. "bundled qwen2.5-coder-0.5b")."""

    urls: tuple[str, ...] = ()
    origin: str = ""
    served: str = ""

    @property
    def embedded(self) -> bool:
        return not self.urls

    def describe(self) -> str:
        if self.urls:
            return f"{','.join(self.urls)} (from {self.origin})"
        return f"embedded llama-server with {self.served}"

    def fix_hint(self) -> str:
        """The end of an 'unreachable' message: what to fix, named where it is set."""
        if self.urls:
            return f"start it or fix {self.origin}"
        return f"the embedded llama-server with {self.served} stopped answering; see its log and re-run"


def model_reach(model: ModelSpec, source: str, env_urls: Iterable[str] = (), env_model: str = "") -> Reach:
    """How ``model`` of the study read from ``source`` is reached, in the order the llm resource uses:
    its urls in the study file, else ``env_urls`` (EVALMISLEAD_LLM_URL, a one-model study), else the
    embedded server with ``env_model`` (EVALMISLEAD_EMBEDDED_MODEL), its bundled model or its GGUF."""
    if model.urls:
        return Reach(model.urls, f"the urls of model {model.name} in study file {source}")
    env = tuple(u.rstrip("/") for u in env_urls)
    if env:
        return Reach(env, "EVALMISLEAD_LLM_URL")
    if env_model:
        return Reach(served=f"EVALMISLEAD_EMBEDDED_MODEL {env_model}")
    if model.bundled:
        return Reach(served=f"bundled {model.bundled}")
    return Reach(served=f"GGUF {model.gguf}" if model.gguf else "the bundled default model")


@dataclass(frozen=True)
class Study:
    models: tuple[ModelSpec, ...]
    source: str  # the file it was read from (or "built-in")
    languages: tuple[str, ...] = (DEFAULT_LANGUAGE,)  # in the file's order; "python" keeps unprefixed keys

    @property
    def other_languages(self) -> tuple[str, ...]:
        """The languages whose assets carry the language as a key prefix (every one but Python)."""
        return tuple(lang for lang in self.languages if lang != DEFAULT_LANGUAGE)

    @property
    def prefixed(self) -> bool:
        """Several models: each model's asset keys carry its key as prefix."""
        return len(self.models) > 1

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.models]

    def model_path(self, path: Path, model: ModelSpec) -> Path:
        """``model``'s file or folder: ``path`` itself in a one-model study, else beside it under the
        model's key (report/ -> report/qwen2_5_coder_1_5b/, review/x.csv -> review/qwen2_5_coder_1_5b/x.csv)."""
        if not self.prefixed:
            return path
        return path / model.key if not path.suffix else path.parent / model.key / path.name

    def model(self, name: str) -> ModelSpec:
        for m in self.models:
            if m.name == name:
                return m
        raise StudyError(f"model {name!r} is not in the study ({self.source}); choose from {', '.join(self.names)}")

    def by_key(self, key: str) -> ModelSpec:
        for m in self.models:
            if m.key == key:
                return m
        raise StudyError(f"no model of the study has the key {key!r}")


def _model(raw: Any, where: str, bundled_names: Iterable[str]) -> ModelSpec:
    if not isinstance(raw, dict):
        raise StudyError(f"{where}: each [[models]] entry must be a table")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise StudyError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(sorted(_KEYS))}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise StudyError(f"{where}: name {name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    reach = [k for k in ("bundled", "gguf", "urls") if raw.get(k)]
    if len(reach) != 1:
        raise StudyError(f"{where} ({name}): give exactly one of bundled, gguf or urls (got {reach or 'none'})")
    bundled = raw.get("bundled", "")
    known = list(bundled_names)
    if bundled and bundled not in known:
        raise StudyError(f"{where} ({name}): bundled = {bundled!r} is not a bundled model; choose from {', '.join(known)}")
    urls = raw.get("urls", [])
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
        raise StudyError(f"{where} ({name}): urls must be a list of http:// or https:// URLs")
    ints: dict[str, int | None] = {}
    for k in ("slots", "max_tokens_off", "max_tokens_on", "spec_max_tokens_off"):
        v = raw.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise StudyError(f"{where} ({name}): {k} = {v!r} must be a whole number of at least 1")
        ints[k] = v
    kwargs = raw.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict) or "enable_thinking" in kwargs:
        raise StudyError(f"{where} ({name}): chat_template_kwargs must be a table without enable_thinking "
                         "(the thinking partition sets it)")
    thinking = raw.get("thinking")
    if thinking is not None and not isinstance(thinking, bool):
        raise StudyError(f"{where} ({name}): thinking = {thinking!r} must be true or false")
    key_env = raw.get("api_key_env", "")
    if not isinstance(key_env, str) or (key_env and not _ENV_NAME.match(key_env)):
        raise StudyError(f"{where} ({name}): api_key_env = {key_env!r} must name an environment variable, e.g. "
                         "OPENAI_API_KEY (the key itself never goes in the study file)")
    headers = raw.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise StudyError(f"{where} ({name}): headers must be a table of strings")
    if any(k.lower() == "authorization" for k in headers):
        raise StudyError(f"{where} ({name}): put the key in an environment variable named by api_key_env, "
                         "not in headers (the study file is committed and shared)")
    api, api_model = raw.get("api", "llama.cpp"), raw.get("api_model", "")
    if api not in ("llama.cpp", "openai"):
        raise StudyError(f"{where} ({name}): api = {api!r} must be \"llama.cpp\" (llama-server) or \"openai\" "
                         "(a hosted OpenAI-compatible endpoint)")
    if not isinstance(api_model, str) or (api_model and not urls):
        raise StudyError(f"{where} ({name}): api_model names the model id a server at urls expects; give urls too "
                         "(the embedded server is named by the study)")
    if api == "openai" and not urls:
        raise StudyError(f"{where} ({name}): api = \"openai\" is for a hosted endpoint: give its urls")
    thinking_off = raw.get("thinking_off", DEFAULT_THINKING_OFF)
    if thinking_off not in THINKING_OFF:
        allowed = ", ".join(f'"{v}"' for v in THINKING_OFF)
        raise StudyError(f"{where} ({name}): thinking_off = {thinking_off!r} must be one of {allowed} (how thinking "
                         "is switched off; docs/own-model.md says which suits which model family)")
    if thinking_off == "budget0" and api == "openai":
        raise StudyError(f"{where} ({name}): thinking_off = \"budget0\" is a llama-server request field, which "
                         "api = \"openai\" leaves out; use \"template\" or \"prefill\"")
    return ModelSpec(
        name=name, bundled=bundled, gguf=str(raw.get("gguf", "")), urls=tuple(u.rstrip("/") for u in urls),
        slots=ints["slots"], chat_template_kwargs=dict(kwargs), max_tokens_off=ints["max_tokens_off"],
        max_tokens_on=ints["max_tokens_on"], spec_max_tokens_off=ints["spec_max_tokens_off"],
        parameters=str(raw.get("parameters", "")),
        family=str(raw.get("family", "")), thinking=thinking, api_key_env=key_env, headers=dict(headers),
        api=api, api_model=api_model, thinking_off=thinking_off,
    )


def parse_study(text: str, source: str, bundled_names: Iterable[str]) -> Study:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{source} is not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"models", "problems", "languages", "execution"})
    if unknown:
        raise StudyError(f"{source}: unknown top-level key(s) {unknown}; allowed: models, problems, languages, "
                         "execution")
    parse_execution(data.get("execution"), source)
    languages = parse_languages(data.get("languages", [DEFAULT_LANGUAGE]), source)
    problems = data.get("problems")
    if problems is not None and not (isinstance(problems, str) or (
            isinstance(problems, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in problems))):
        raise StudyError(f"{source}: problems = {problems!r} must be a string like \"0-9,30\" or a list of numbers")
    raw_models = data.get("models")
    if not isinstance(raw_models, list) or not raw_models:
        raise StudyError(f"{source} lists no model; add a [[models]] table with a name and bundled, gguf or urls")
    names = list(bundled_names)
    models = tuple(_model(m, f"{source} [[models]] #{i + 1}", names) for i, m in enumerate(raw_models))
    _check_unique(models, source)
    clash = [m.name for m in models if m.key in LANGUAGES]
    if clash:
        raise StudyError(f"{source}: model {clash[0]!r} has a language's name as key; rename it (a language is an "
                         "asset-key prefix inside the model's)")
    return Study(models, source, languages)


def parse_languages(raw: Any, source: str) -> tuple[str, ...]:
    """``languages = [...]`` of the study file: a non-empty list of distinct allowed names, in the file's order."""
    allowed = ", ".join(f'"{lang}"' for lang in LANGUAGES)
    if (not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw)
            or any(v not in LANGUAGES for v in raw) or len(set(raw)) != len(raw)):
        raise StudyError(f"{source}: languages = {raw!r} must be a non-empty list of distinct names from "
                         f"{allowed}, e.g. languages = [\"python\", \"java\"]")
    if DEFAULT_LANGUAGE not in raw:  # Python's chain is the study's own (PROTOCOL.md); the others sit beside it
        raise StudyError(f"{source}: languages = {raw!r} must include \"python\" (the study's own chain; "
                         f"allowed: {allowed})")
    return tuple(raw)


@dataclass(frozen=True)
class ExecutionSettings:
    """The study file's ``[execution]`` table: ``dask_scheduler`` ("" = the local pool, as without the table)
    and the answer files per Dask task."""

    dask_scheduler: str = ""
    answers_per_task: int = DEFAULT_ANSWERS_PER_TASK


def parse_execution(raw: Any, source: str) -> ExecutionSettings:
    """``[execution]`` of the study file (None: absent); one line naming the key when a value is wrong."""
    if raw is None:
        return ExecutionSettings()
    if not isinstance(raw, dict):
        raise StudyError(f"{source}: execution must be a table ([execution] with dask_scheduler = \"tcp://host:8786\")")
    unknown = sorted(set(raw) - set(_EXECUTION_KEYS))
    if unknown:
        raise StudyError(f"{source} [execution]: unknown key(s) {unknown}; allowed: {', '.join(_EXECUTION_KEYS)}")
    address = raw.get("dask_scheduler", "")
    if not isinstance(address, str) or (address and not re.match(r"^(tcp|tls|ws|wss|inproc)://\S+$", address)):
        raise StudyError(f"{source} [execution]: dask_scheduler = {address!r} must be a Dask scheduler address like "
                         "\"tcp://10.0.0.5:8786\" (or leave it out to run the tests on this machine)")
    per_task = raw.get("answers_per_task", DEFAULT_ANSWERS_PER_TASK)
    if not isinstance(per_task, int) or isinstance(per_task, bool) or per_task < 1:
        raise StudyError(f"{source} [execution]: answers_per_task = {per_task!r} must be a whole number of at least 1")
    return ExecutionSettings(address, per_task)


def _check_unique(models: Iterable[ModelSpec], source: str) -> None:
    seen: dict[str, str] = {}
    for m in models:
        if m.key in seen:
            raise StudyError(f"{source}: models {seen[m.key]!r} and {m.name!r} have the same key {m.key!r}; rename one")
        seen[m.key] = m.name



def select(study: Study, names: Iterable[str], bundled_defaults: Mapping[str, ModelSpec]) -> Study:
    """The study narrowed (and ordered) to ``names``: models of the file, or bundled models by name."""
    chosen: list[ModelSpec] = []
    for name in names:
        if name in study.names:
            chosen.append(study.model(name))
        elif name in bundled_defaults:
            chosen.append(bundled_defaults[name])
        else:
            raise StudyError(f"model {name!r} is neither in the study ({study.source}) nor bundled; choose from "
                             f"{', '.join(dict.fromkeys([*study.names, *bundled_defaults]))}")
    if not chosen:
        raise StudyError("EVALMISLEAD_MODELS / --models names no model; name one or more, e.g. qwen2.5-coder-0.5b")
    if len({m.name for m in chosen}) != len(chosen):  # before the key check, which a repeated name also trips
        raise StudyError(f"a model is named twice in {', '.join(m.name for m in chosen)}")
    _check_unique(chosen, study.source)
    return Study(tuple(chosen), study.source, study.languages)
