"""Telling our own unix socket from one re-created at the same path."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

# (st_dev, st_ino, st_ctime_ns): a re-created socket may reuse the inode number.
SocketIdentity = tuple[int, int, int]


def socket_identity(path: Path) -> SocketIdentity | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def remove_if_ours(path: Path, identity: SocketIdentity | None) -> None:
    """Remove the socket only if it is still ours (a restarted plugin may own the path)."""
    if identity is not None and socket_identity(path) == identity:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
