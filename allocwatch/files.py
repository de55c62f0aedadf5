"""Reading a file that another program may replace with something else."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_regular_file(path: Path) -> tuple[bytes, int]:
    """The bytes of a regular file and its mtime in ns; OSError for anything else.

    Opened non-blocking, so a FIFO or a device put in the file's place is
    refused at once instead of blocking the watcher (and its shutdown) until
    a writer appears.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, max(st.st_size, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks), st.st_mtime_ns
    finally:
        os.close(fd)
