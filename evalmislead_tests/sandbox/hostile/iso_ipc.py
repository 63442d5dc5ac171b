# SysV IPC is per run: no segment, semaphore or queue of another run is visible, none survives.
import shutil
import subprocess


def _ipcs(kind: str) -> list[str]:
    out = subprocess.run(["ipcs", kind], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln[:2] == "0x"]


def test_no_foreign_ipc_then_leave_some():
    if not (shutil.which("ipcs") and shutil.which("ipcmk")):  # util-linux missing: nothing to look at
        return
    assert _ipcs("-m") == [] and _ipcs("-s") == [] and _ipcs("-q") == []
    for flag in (["-M", "4096"], ["-S", "1"], ["-Q"]):
        subprocess.run(["ipcmk", *flag], capture_output=True, check=True)
    assert len(_ipcs("-m")) == 1
