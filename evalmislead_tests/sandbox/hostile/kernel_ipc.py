# SysV IPC objects do not cross tests of one run: a segment, a semaphore set and a queue left by one test are
# not there for the next.
import shutil
import subprocess


def _ipcs(kind):
    out = subprocess.run(["ipcs", kind], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln[:2] == "0x"]


def test_leaves_a_segment_for_a_sibling():
    if not (shutil.which("ipcs") and shutil.which("ipcmk")):  # util-linux missing: nothing to look at
        return
    for flag in (["-M", "4096"], ["-S", "1"], ["-Q"]):
        subprocess.run(["ipcmk", *flag], capture_output=True, check=True)
    assert len(_ipcs("-m")) == 1


def test_sees_no_segment():
    if not shutil.which("ipcs"):
        return
    assert _ipcs("-m") == [] and _ipcs("-s") == [] and _ipcs("-q") == []
