"""Logging setup: one line per event, as text or JSON."""

from __future__ import annotations

import json
import logging
import re
import sys
import time

LEVELS = ("debug", "info", "warning", "error")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, sort_keys=False)


class TextFormatter(logging.Formatter):
    """`<time> <LEVEL> <message>`, on one line even when the message has several.

    Parser errors (PyYAML's, grpc's) span lines; a log collector would split
    them into separate, unrelated-looking events.
    """

    def format(self, record: logging.LogRecord) -> str:
        return _LINE_BREAKS.sub(" ", super().format(record))


_LINE_BREAKS = re.compile(r"\s*\n\s*")


def configure(log_format: str = "text", level: str = "info") -> None:
    # Neither format shows the process or thread; left on, every record asks
    # the kernel for the pid, a syscall on each change the watcher logs.
    logging.logProcesses = logging.logThreads = logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        fmt = TextFormatter(
            "%(asctime)s.%(msecs)03dZ %(levelname)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%S"
        )
        fmt.converter = time.gmtime
        handler.setFormatter(fmt)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
