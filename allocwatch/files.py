"""Reading a file that another program may replace with something else, or fill.

Every document allocwatch reads (the profile, the override file) is refused
above MAX_DOCUMENT_BYTES before a byte of it is read: parsing costs many
times a file's size in memory and time, and anyone who can write the file
could otherwise take the watcher's memory limit or its poll.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Real profiles and override files are tens of KiB; this leaves them ample room.
MAX_DOCUMENT_BYTES = 1 << 20


class FileTooLarge(ValueError):
    """The file is over the size bound; it was not read."""

    def __init__(self, size: int, limit: int, stat_result: os.stat_result) -> None:
        super().__init__(
            f"{size} bytes, over allocwatch's bound of {limit} bytes ({limit / (1 << 20):g} MiB); "
            "not read"
        )
        self.stat = stat_result


def read_regular_file(
    path: Path, max_bytes: int = MAX_DOCUMENT_BYTES
) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file and its stat; OSError for anything else.

    Opened non-blocking, so a FIFO or a device put in the file's place is
    refused at once instead of blocking the watcher (and its shutdown) until
    a writer appears. FileTooLarge, before reading, above `max_bytes` (and
    should the file grow past it while read).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > max_bytes:
            raise FileTooLarge(st.st_size, max_bytes, st)
        chunks = []
        size = 0
        while chunk := os.read(fd, max(st.st_size, 1 << 16)):
            size += len(chunk)
            if size > max_bytes:
                raise FileTooLarge(size, max_bytes, st)
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)
