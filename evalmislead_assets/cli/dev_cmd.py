"""`evalmislead dev`: `dagster dev -w workspace.yaml` that stops on the first SIGINT or SIGTERM, however started.

Why: a process started in the background by a non-interactive shell (`dagster dev ... &` in a script,
a CI step, a tool's shell) begins with SIGINT ignored (POSIX; bash cannot even trap it back). Python then
installs no KeyboardInterrupt handler, and `dagster dev` copies SIGINT's disposition to SIGTERM
(dagster._utils.interrupts.setup_interrupt_handlers), so both are ignored: it ran on for as long as it was
watched (over 40 s, 200 s measured) and only SIGKILL stopped it, which leaves its webserver, daemon and code
servers running. This command restores the default disposition of both signals, then replaces itself
with `dagster dev` (same pid), which then shuts its services down on the first signal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from evalmislead_assets import settings
from evalmislead_assets.errors import ConfigError

HELP = ("start the Dagster UI and daemon (dagster dev -w workspace.yaml, DAGSTER_HOME as `evalmislead run` "
        "uses it) so that the first Ctrl-C / SIGINT / SIGTERM stops it and its children, even in the background")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--port", default="", help="webserver port (default: dagster dev's, 3000)")
    p.add_argument("--host", default="", help="webserver host (default: dagster dev's, 127.0.0.1)")
    p.add_argument("dagster_args", nargs=argparse.REMAINDER,
                   help="anything after -- goes to dagster dev as it is")


def command(args: argparse.Namespace) -> list[str]:
    """The dagster dev command line: this interpreter's `dagster`, the project's workspace.yaml."""
    exe = Path(sys.executable).parent / "dagster"
    dagster = str(exe) if exe.is_file() else shutil.which("dagster")
    if not dagster:
        raise ConfigError("no dagster command next to this Python or on PATH; install the project "
                          "(scripts/bootstrap.sh)")
    extra = [a for a in args.dagster_args if a != "--"]
    out = [dagster, "dev", "-w", str(settings.PROJECT_ROOT / "workspace.yaml")]
    out += ["-p", args.port] if args.port else []
    out += ["-h", args.host] if args.host else []
    return out + extra


def run(args: argparse.Namespace) -> int:
    from evalmislead_assets.cli.run_study import ensure_dagster_home

    cmd = command(args)
    home = ensure_dagster_home()  # DAGSTER_HOME (default dagster_home/ in the project) with dagster.yaml
    os.environ["DAGSTER_HOME"] = str(home)
    print(f"evalmislead: {' '.join(cmd)}  (DAGSTER_HOME {home}; stop it with Ctrl-C or kill -INT/-TERM {os.getpid()})",
          flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)  # an ignored signal stays ignored across exec; a default one does not
    os.execv(cmd[0], cmd)
    return 0  # not reached
