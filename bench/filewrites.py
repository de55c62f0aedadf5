"""Counting the writes of one file through inotify, for the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify, flags


class FileWrites:
    """Counts writes of one file: renames onto it and in-place closes after writing.

    Waiting on events rather than polling the file keeps the benchmark itself
    off the CPU it is measuring.
    """

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self._inotify = INotify()
        self._inotify.add_watch(path.parent, flags.CLOSE_WRITE | flags.MOVED_TO)
        self.writes = 0
        self.last_write = 0.0

    def drain(self, timeout: float = 0.0) -> int:
        """Consume pending events (waiting up to `timeout` s for the first); count ours."""
        events = self._inotify.read(timeout=round(timeout * 1000))
        seen = sum(1 for event in events if event.name == self.name)
        if seen:
            self.writes += seen
            self.last_write = time.monotonic()
        return seen

    def wait_for(self, read: Callable[[], object], want: object, timeout: float) -> bool:
        """Until `read()` returns `want`, re-read after each write; False after `timeout` s."""
        deadline = time.monotonic() + timeout
        while read() != want:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.drain(remaining)
        return True

    def close(self) -> None:
        self._inotify.close()
