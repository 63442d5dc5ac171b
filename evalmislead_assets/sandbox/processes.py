"""Child processes started in a session of their own: signal the whole process group."""

from __future__ import annotations

import os
import signal
import subprocess


def signal_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``proc`` (started with start_new_session=True).

    A group that is gone already is fine; where the group may not be signalled, the leader
    alone gets the signal (a no-op once it has been reaped).
    """
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        proc.send_signal(sig)
