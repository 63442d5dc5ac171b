"""assets/sandbox_config.py: the launchpad settings every sandbox asset shares, and its isolation note."""

from __future__ import annotations

import pytest

from evalmislead_assets.assets.determinism import ProbeConfig
from evalmislead_assets.assets.sandbox_config import ExecutionConfig, isolation_note, make_sandbox, warn_if_degraded
from evalmislead_assets.errors import ConfigError
from evalmislead_assets.resources import StudySettingsResource
from evalmislead_assets.sandbox.host import TEST_TIMEOUT_S
from evalmislead_assets.sandbox.isolation import Isolation

STUDY = StudySettingsResource()  # empty: every value resolved from the study file and the environment
FULL = Isolation(network=True, readonly_fs=True, pid_namespace=True, own_uid=True, chain_namespaces=True,
                 test_namespaces=True)


def test_launchpad_settings_build_the_sandbox(monkeypatch) -> None:
    monkeypatch.setenv("EVALMISLEAD_SANDBOX_WORKERS", "3")
    box = make_sandbox(ExecutionConfig(), STUDY)
    assert (box.workers, box.limits.timeout_s) == (3, TEST_TIMEOUT_S)
    box = make_sandbox(ExecutionConfig(workers=1, timeout_s=2.5), STUDY)  # the launchpad wins over the environment
    assert (box.workers, box.limits.timeout_s) == (1, 2.5)
    box = make_sandbox(ProbeConfig(n=2, workers=2, timeout_s=4.0), STUDY)  # the probe's config extends ExecutionConfig
    assert (box.workers, box.limits.timeout_s) == (2, 4.0)
    monkeypatch.setenv("EVALMISLEAD_SANDBOX_WORKERS", "many")
    with pytest.raises(ConfigError, match="EVALMISLEAD_SANDBOX_WORKERS"):
        make_sandbox(ExecutionConfig(), STUDY)


def test_isolation_note_names_what_is_missing() -> None:
    assert isolation_note(None) == "no test ran"
    assert isolation_note(FULL) == "full (no network, read-only filesystem, PID namespace, own uid)"
    partial = Isolation(network=True, readonly_fs=True, pid_namespace=False, own_uid=False, user_namespace=True,
                        chain_namespaces=True, notes=["unshare(CLONE_NEWPID): EPERM"])
    assert isolation_note(partial) == ("without PID namespace, per-test IPC/network namespaces "
                                       "(unshare(CLONE_NEWPID): EPERM)")


class _Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, msg: str) -> None:
        self.warnings.append(msg)


class _Context:
    def __init__(self) -> None:
        self.log = _Log()


def test_degraded_isolation_warns_once() -> None:
    box = make_sandbox(ExecutionConfig(workers=1), STUDY)
    context = _Context()
    warn_if_degraded(context, box)  # type: ignore[arg-type]  (no batch ran: nothing to say)
    box.isolation = FULL
    warn_if_degraded(context, box)  # type: ignore[arg-type]
    assert context.log.warnings == []
    box.isolation = Isolation(network=False, readonly_fs=True, pid_namespace=True, own_uid=True, chain_namespaces=True,
                              test_namespaces=True)
    warn_if_degraded(context, box)  # type: ignore[arg-type]
    (warning,) = context.log.warnings
    assert warning.startswith("sandbox ran without no-network namespace;") and "limits still applied" in warning
