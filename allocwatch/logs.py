"""Logging setup: one line per event, as text or JSON."""

from __future__ import annotations

import json
import logging
import re
import sys
import time

LEVELS = ("debug", "info", "warning", "error")
# Ids come from pods and profiles, which anyone on the node may write: a log
# line names at most this many, each cut to this length, and counts the rest.
MAX_LOGGED_IDS = 20
MAX_LOGGED_ID_CHARS = 128


def shorten(text: str, limit: int = MAX_LOGGED_ID_CHARS) -> str:
    """`text`, cut to `limit` characters with a count of the rest."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...(+{len(text) - limit} chars)"


def id_list(ids: list[str], limit: int = MAX_LOGGED_IDS) -> str:
    """The first `limit` ids, each shortened, then how many more there are."""
    shown = ", ".join(shorten(i) for i in ids[:limit])
    rest = len(ids) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


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
    them into separate, unrelated-looking events. Any other control character
    (a terminal escape, a carriage return, U+2028) is written as its escape:
    names from pods and files must neither forge a line nor repaint a terminal.
    """

    def format(self, record: logging.LogRecord) -> str:
        line = _LINE_BREAKS.sub(" ", super().format(record))
        return _CONTROLS.sub(_escape, line)


_LINE_BREAKS = re.compile(r"[ \t]*\r?\n[ \t]*")
# C0 and C1 controls but tab, DEL, the Unicode line and paragraph separators,
# and the bidirectional overrides that reorder what a terminal shows.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
