# A test cannot change the limits, nice value or scheduling its siblings start with: it renices, limits,
# idles and pins the chain's init (PID 1, which forks every test), its process group and its user; the
# next test starts as the runner set it.
import os
import resource

RUNNER_NICE = __NICE__
RUNNER_NOFILE = __NOFILE__
RUNNER_AFFINITY = __AFFINITY__


def test_renices_and_limits_the_chain():
    attempts = {
        "renice init": lambda: os.setpriority(os.PRIO_PROCESS, 1, 19),
        "renice init's group": lambda: os.setpriority(os.PRIO_PGRP, 1, 19),
        "renice the user": lambda: os.setpriority(os.PRIO_USER, 0, 19),
        "limit init's files": lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (40, 40)),
        "limit init's memory": lambda: resource.prlimit(1, resource.RLIMIT_AS, (64 << 20, 64 << 20)),
        "idle init": lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0)),
        "pin init": lambda: os.sched_setaffinity(1, {RUNNER_AFFINITY[0]}),
    }
    for attempt in attempts.values():
        try:
            attempt()
        except OSError:
            pass


def test_starts_as_the_runner_set_it():
    assert os.getpriority(os.PRIO_PROCESS, 0) == RUNNER_NICE
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (RUNNER_NOFILE, RUNNER_NOFILE)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert sorted(os.sched_getaffinity(0)) == RUNNER_AFFINITY
    os.setpriority(os.PRIO_PROCESS, 0, min(RUNNER_NICE + 1, 19))  # its own nice value stays its own
    resource.setrlimit(resource.RLIMIT_NOFILE, (RUNNER_NOFILE - 1, RUNNER_NOFILE - 1))
