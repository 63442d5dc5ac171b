"""The adversarial corpus (evalmislead_tests/sandbox/hostile/*.py): run it, and what each file must get.

``run_corpus(base)`` runs every file against a buggy and a fixed version through ``Sandbox`` with
the static scan off (so that the runtime defences are what is measured), plus the mutant check,
and returns plain JSON, so that the same function can run in this process (as root) and in a
child dropped to an unprivileged user (sandbox_as_user.py). ``check(result)`` lists every
expectation that failed.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from evalmislead_assets.mutation import scoring as mutation_scoring
from evalmislead_assets.sandbox.host import Limits, Module, Sandbox
from evalmislead_assets.sandbox.limits import fit_to_host
from evalmislead_tests import kernel_keys

HOSTILE = Path(__file__).resolve().parent / "sandbox" / "hostile"
BUGGY = "def get_positive(l):\n    return [e for e in l if e < 0]\n"
FIXED = "def get_positive(l):\n    return [e for e in l if e > 0]\n"
MUTANT = "def get_positive(l):\n    return [e for e in l if e >= 0]\n"
LIMITS = Limits(timeout_s=2.0, memory_mb=512)

# file -> {test id: status on the buggy version} (the fixed version: the same, except where FIXED_DIFFERS)
EXPECTED: dict[str, dict[str, str]] = {
    "pid_forge_while_running.py": {"test_honest_before": "passed", "test_forges_init_then_hangs": "crashed",
                             "test_honest_after": "passed"},
    "pid_forge_started.py": {"test_forges_started_pid": "crashed", "test_signals_the_canary_itself": "failed",
                             "test_kill_minus_one": "failed"},
    "malformed_lines.py": {"test_plain_report_without_nonce": "crashed", "test_unknown_status": "crashed",
                           "test_not_an_object": "crashed", "test_not_json": "crashed",
                           "test_oversize_line": "crashed", "test_honest_sibling": "passed"},
    "forged_done.py": {"test_forged_done": "crashed", "test_done_for_another_test": "crashed"},
    "tamper_plugin_register.py": {"test_forges_its_own_pass": "tampered"},
    "tamper_monkeypatch_runtime.py": {"test_monkeypatches_report_outcome": "tampered",
                                      "test_setattr_on_report_class": "tampered"},
    "tamper_frames.py": {"test_walks_frames_for_the_nonce": "tampered", "test_walks_a_traceback": "tampered"},
    "tamper_gc_ctypes.py": {"test_gc_objects": "tampered", "test_ctypes_libc": "tampered",
                            "test_reads_own_memory": "tampered"},
    "iso_ipc.py": {"test_no_foreign_ipc_then_leave_some": "passed"},
    "iso_sibling_folder.py": {"test_only_own_solution_is_visible": "passed"},
    "iso_proc.py": {"test_proc_shows_only_the_namespace": "passed"},
    "iso_leftover.py": {"test_leaves_files_behind": "passed", "test_sees_no_leftover": "passed"},
    "iso_disk_quota.py": {"test_cannot_fill_the_disk": "passed", "test_dev_shm_and_tmp_are_read_only": "passed"},
    "iso_write_outside.py": {"test_cannot_write_outside_the_run": "passed"},
    # kernel state shared with the host or between tests (kernel_state.py, import_files.py)
    "kernel_keyring_host.py": {"test_cannot_reach_the_hosts_keys": "passed"},
    "kernel_keyring_left.py": {"test_finds_no_key_then_leaves_one": "passed", "test_finds_no_key_left": "passed"},
    "kernel_limits.py": {"test_renices_and_limits_the_chain": "passed", "test_starts_as_the_runner_set_it": "passed"},
    "kernel_ipc.py": {"test_leaves_a_segment_for_a_sibling": "passed", "test_sees_no_segment": "passed"},
    "kernel_abstract_socket.py": {"test_holds_a_name_and_queues_a_connection": "passed",
                                  "test_finds_the_name_free_and_nothing_queued": "passed"},
    "kernel_import_files.py": {"test_changes_the_import_files": "passed",
                               "test_finds_them_as_the_import_left_them": "passed"},
    # the batch root, the test's stdout, code pytest compiles from the test's strings
    "iso_batch_root.py": {"test_leaves_a_file_in_the_batch_root": "passed", "test_finds_nothing_in_the_batch_root": "passed"},
    "iso_stdout.py": {"test_stdout_opens_nothing": "passed"},
    "tamper_string_condition.py": {"test_string_condition_reaches_frames": "tampered"},
}
FIXED_DIFFERS = {("pid_forge_while_running.py", "test_honest_before"), ("pid_forge_while_running.py", "test_honest_after"),
                 ("malformed_lines.py", "test_honest_sibling"), ("iso_leftover.py", "test_leaves_files_behind")}
# file -> how its collection error starts (zero tests)
FILE_ERRORS = {
    "pid_forge_at_import.py": "crashed: malformed message",
    "malformed_at_import.py": "crashed: malformed message",
    "tamper_pytest_plugins.py": "tampered: ",
    "tamper_patch_report_at_import.py": "tampered: ",
    "tamper_patch_harness_at_import.py": "tampered: ",
    "tamper_at_import_runtime.py": "tampered: ",
    "cap_many_tests.py": "too many tests: 6000 > 5000",
    "cap_long_ids.py": "test id too long: 600011 > 1000 characters",
}


REPO = HOSTILE.parents[2]


def outside_paths(base: str) -> tuple[str, str]:
    """Where iso_write_outside.py tries to write: beside the batch folder, and in the repository."""
    tag = os.path.basename(base)
    return os.path.join(os.path.dirname(base), f"escaped-{tag}.txt"), str(REPO / f"escaped-{tag}.txt")


def source(name: str, canary: int, base: str = "/nonexistent/base", host_key: str = "evalmislead-host-none") -> str:
    text = (HOSTILE / name).read_text()
    outside, repo_file = outside_paths(base)
    return (text.replace("__CANARY__", str(canary)).replace("__CPU__", str(LIMITS.cpu_s))
            .replace("__NDIRS__", "2").replace("__OUTSIDE__", repr(outside)).replace("__REPO_FILE__", repr(repo_file))
            .replace("__HOST_KEY__", repr(host_key)).replace("__NICE__", str(os.getpriority(os.PRIO_PROCESS, 0)))
            .replace("__NOFILE__", str(fit_to_host(LIMITS)[0].open_files))
            .replace("__AFFINITY__", repr(sorted(os.sched_getaffinity(0)))))


def _ipc_count() -> int:
    try:
        out = subprocess.run(["ipcs"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return 0
    return sum(1 for ln in out.splitlines() if ln[:2] == "0x")


def run_corpus(base: str) -> dict[str, Any]:
    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ipc_before = _ipc_count()
    host_key, planted = kernel_keys.plant()
    try:
        box = Sandbox(LIMITS, workers=2, base_dir=base, static_scan=False)
        names = sorted(list(EXPECTED) + list(FILE_ERRORS))
        modules = [Module(code, source(n, canary.pid, base, host_key)) for n in names for code in (BUGGY, FIXED)]
        collected = box.collect(modules)
        files: dict[str, Any] = {}
        requests: list[tuple[Module, str]] = []
        for k, name in enumerate(names):
            b, f = collected[2 * k], collected[2 * k + 1]
            files[name] = {"ids": b.test_ids, "error": b.error, "fixed_error": f.error, "tests": {}}
            requests += [(modules[2 * k + v], t) for t in b.test_ids for v in (0, 1)]
        ran = box.run(requests)
        for (module, test_id), r in zip(requests, ran):
            name = names[modules.index(module) // 2]
            files[name]["tests"].setdefault(test_id, []).append([r.status, r.detail[:200]])
        mutant = _mutant_check(base, canary.pid)
        alive = canary.poll() is None
    finally:
        canary.send_signal(signal.SIGKILL)
        canary.wait()
        keys_left = kernel_keys.search(kernel_keys.LEFT)
        kernel_keys.remove(planted + keys_left)
    escaped = [p for p in outside_paths(base) if os.path.exists(p)]
    for path in escaped:  # recorded as a failure; not left behind
        os.unlink(path)
    return {"files": files, "canary_alive": alive, "ipc_before": ipc_before, "ipc_after": _ipc_count(),
            "escaped": escaped, "host_key_planted": bool(planted), "keys_left": keys_left,
            "left_in_base": sorted(os.listdir(base)), "isolation": dataclasses.asdict(box.isolation),
            "uid": os.getuid(), "mutant": mutant}


def _mutant_check(base: str, canary: int) -> dict[str, Any]:
    """The environment digest on the fixed run and a mutant run (mutation_scoring's short limit); kills."""
    src = source("mutant_detect.py", canary)
    ids = ["test_environment_digest", "test_passes_on_any_environment_it_saw_on_the_fixed_run"]
    full = Sandbox(LIMITS, workers=2, base_dir=base)
    short = Sandbox(dataclasses.replace(LIMITS, timeout_s=1.0), workers=2, base_dir=base)
    fixed = full.run([(Module(FIXED, src), ids[0])])[0]
    mut = short.run([(Module(MUTANT, src), ids[0])])[0]
    kills = mutation_scoring.run_kills([mutation_scoring.TestFile(src, tuple(ids), FIXED, ((1, MUTANT), (2, BUGGY)))],
                                       full, mutant_timeout_s=1.0, max_runs=None)
    return {"fixed_view": fixed.detail.split("VIEW ")[-1][:16], "mutant_view": mut.detail.split("VIEW ")[-1][:16],
            "killed_by": {str(k): v for k, v in kills.files[0].killed_by.items()},
            "passing": kills.files[0].passing}


def check(result: dict[str, Any]) -> list[str]:
    """Every expectation the result misses (empty: all held)."""
    bad: list[str] = []
    files = result["files"]
    for name, tests in EXPECTED.items():
        got = files[name]
        if got["error"] or list(got["tests"]) != list(tests):
            bad.append(f"{name}: collected {got['ids']} ({got['error']})")
            continue
        for test_id, want in tests.items():
            (bs, bd), (fs, fd) = got["tests"][test_id]
            want_fixed = ("failed" if want == "passed" else want) if (name, test_id) in FIXED_DIFFERS else want
            if (bs, fs) != (want, want_fixed):
                bad.append(f"{name}::{test_id}: {bs}/{fs} != {want}/{want_fixed} ({bd} | {fd})")
    for name, prefix in FILE_ERRORS.items():
        got = files[name]
        for err in (got["error"], got["fixed_error"]):
            if got["ids"] or not (err or "").startswith(prefix):
                bad.append(f"{name}: error {err!r}, ids {len(got['ids'])}; wanted {prefix!r}")
    if not result["canary_alive"]:
        bad.append("the canary process was killed")
    if result["ipc_after"] != result["ipc_before"]:
        bad.append(f"IPC objects on the host: {result['ipc_before']} -> {result['ipc_after']}")
    if result["keys_left"]:
        bad.append(f"keys left in the host's keyrings: {result['keys_left']}")
    if result["escaped"]:
        bad.append(f"files written outside the run: {result['escaped']}")
    if result["left_in_base"]:
        bad.append(f"left in the base folder: {result['left_in_base']}")
    mutant = result["mutant"]
    if mutant["fixed_view"] != mutant["mutant_view"] or len(mutant["fixed_view"]) != 16:
        bad.append(f"a mutant run looks different: {mutant}")
    if mutant["passing"] != ["test_passes_on_any_environment_it_saw_on_the_fixed_run"] or any(mutant["killed_by"].values()):
        bad.append(f"a test that never calls the function killed a mutant: {mutant}")
    return bad
