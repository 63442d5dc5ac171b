"""The console logger of every Dagster run of the study (definitions.py): Dagster's own, without stack traces.

A failed step printed its error twice with a 30-line Dagster stack trace each time (the step's
failure, then the run's), before `evalmislead run`'s own one line naming the failure and its fix.
This logger is Dagster's colored console logger (same ``log_level`` and ``name`` config) with a
filter that keeps the first line of such a record and says where the rest is: the run's events in
DAGSTER_HOME (the UI shows them) and ``--log-level DEBUG``, which prints every stack trace again.
"""

from __future__ import annotations

import logging

from dagster import Field, InitLoggerContext, logger
from dagster._utils.log import create_console_logger

MARK = "\nStack Trace:\n"
NOTE = " (stack trace in the run's events; --log-level DEBUG prints it)"


class FoldStackTraces(logging.Filter):
    """A record carrying a stack trace is cut to its first line (the error itself follows in the run's own line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if isinstance(msg, str) and MARK in msg:
            record.msg = msg.strip().splitlines()[0] + NOTE
            record.args = ()
        return True


@logger(
    {
        "log_level": Field(str, is_required=False, default_value="INFO", description="The logger's threshold."),
        "name": Field(str, is_required=False, default_value="dagster", description="The logger's name."),
    },
    description="Dagster's colored console logger; below DEBUG, records with a stack trace keep their first line.",
)
def console_without_traces(init_context: InitLoggerContext) -> logging.Logger:
    level = str(init_context.logger_config["log_level"]).upper()
    log = create_console_logger(name=init_context.logger_config["name"], level=level)
    if level != "DEBUG":
        log.addFilter(FoldStackTraces())
    return log
