"""`evalmislead` command: each subcommand lives in its own module in this package."""

from __future__ import annotations

import argparse
import errno
import importlib
import sys

# subcommand -> module under evalmislead_assets.cli; each module defines
# add_arguments(parser) and run(args) -> int, and a one-line HELP string.
COMMANDS: dict[str, str] = {
    "run": "run_study",
    "server": "server_cmd",
    "score": "score_cmd",
    "sql": "sql_cmd",
    "backfill": "backfill_cmd",
    "export": "export_cmd",
    "verify": "verify_cmd",
    "dev": "dev_cmd",
    "answers": "answers_cmd",
    "results": "results_cmd",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalmislead", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, modname in COMMANDS.items():
        try:
            mod = importlib.import_module(f"evalmislead_assets.cli.{modname}")
        except ModuleNotFoundError as exc:
            if exc.name == f"evalmislead_assets.cli.{modname}":
                continue  # command not built yet
            raise
        p = sub.add_parser(name, help=getattr(mod, "HELP", None), description=getattr(mod, "HELP", None))
        mod.add_arguments(p)
        modules[name] = mod
    args = parser.parse_args(argv)
    from evalmislead_assets.errors import ConfigError

    try:
        return int(modules[args.command].run(args) or 0)
    except ConfigError as exc:
        print(f"evalmislead: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evalmislead: interrupted; stored rows are kept, re-run to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        # a folder it cannot write (read-only, no permission, full), however deep it was raised and whatever
        # wrapped it: one line naming the path, never a traceback that blames the file being read
        cause = _storage_cause(exc)
        if cause is None:
            raise
        where = cause.filename or "a file of the data folder"
        print(f"evalmislead: cannot write {where} ({cause.strerror}); make the folder writable (or free space), "
              "or point EVALMISLEAD_HOME / EVALMISLEAD_DB at a writable folder; stored rows are unchanged",
              file=sys.stderr)
        return 2


_STORAGE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


def _storage_cause(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, its cause or its context) that says a file could not be written."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in _STORAGE_ERRNOS:
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


if __name__ == "__main__":
    sys.exit(main())
