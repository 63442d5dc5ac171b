# /proc is the run's own PID namespace: no zygote, no host process (the pids listed are the namespace's).
import os


def test_proc_shows_only_the_namespace():
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    assert pids and pids[0] == 1 and len(pids) <= 3 and os.getpid() in pids
