"""Files other programs share with us: bounded reads, and the override file's write protocol.

Writers hold an exclusive flock on the sibling `<file>.lock` across
load -> merge -> write, and never delete that lock file. Writes go to a temp
file in the same directory, given the file's mode, then rename, because the engine would
accept a half-written number. One implementation of each, used by every write.

Every document allocwatch reads (the profile, the override file) is refused
above MAX_DOCUMENT_BYTES before a byte of it is read: parsing costs many
times a file's size in memory and time, and anyone who can write the file
could otherwise take the watcher's memory limit or its poll.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import filelock

from allocwatch.shutdown import Stop

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


# How often a writer retries a lock another writer holds.
LOCK_RETRY_SECONDS = 0.05


class LockError(RuntimeError):
    """The lock was not taken: held past the timeout, cancelled, or unusable."""


def lock_path_for(path: Path) -> Path:
    return Path(str(path) + ".lock")


@contextlib.contextmanager
def locked(lock_path: Path, mode: int, timeout: float, stop: Stop | None = None) -> Iterator[None]:
    """Hold the flock on `lock_path` (made with `mode`), waiting at most `timeout`.

    flock on a descriptor we open, never a marker file: a filesystem without
    flock fails here rather than excluding only ourselves. Opened per call, so
    a lock file re-created by an nvml-mock restart is the one locked. Not
    filelock's lock object: it does the same with more bookkeeping per call.
    """
    try:
        fd = _open_lock_file(lock_path, mode)
    except OSError as exc:
        raise LockError(f"lock {lock_path}: {exc.strerror or exc}") from exc
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if filelock.lock_descriptor(fd, blocking=False):
                    break
            except OSError as exc:
                raise LockError(f"lock {lock_path}: {exc.strerror or exc}") from exc
            if stop is not None and stop.is_set():
                raise LockError(f"lock {lock_path}: cancelled by shutdown")
            if time.monotonic() >= deadline:
                raise LockError(
                    f"lock {lock_path}: still held by another writer after {timeout:g}s"
                )
            if stop is not None:
                stop.wait(LOCK_RETRY_SECONDS)
            else:
                time.sleep(LOCK_RETRY_SECONDS)
        try:
            yield
        finally:
            filelock.unlock_descriptor(fd)
    finally:
        os.close(fd)


def _open_lock_file(path: Path, mode: int) -> int:
    """A descriptor on the lock file, creating it with `mode` (whatever the umask) if absent."""
    flags = os.O_RDWR | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:  # another writer created it first
        return os.open(path, flags)
    os.fchmod(fd, mode)
    return fd


def write_atomic(path: Path, text: str, mode: int, previous_mtime_ns: int | None = None) -> None:
    """Temp file in the same directory, `mode`, rename. The caller holds the lock.

    The temp file's name is fixed, `.<name>.allocwatch.tmp`: only a lock
    holder writes it, so no two writers share it, and a write cut short by a
    crash leaves one file that the next write reuses rather than a new
    random one each time.

    The engine notices a change only by mtime or size. When a same-size write
    lands within one timestamp tick of the previous one, give it a later mtime
    so the change cannot be missed.
    """
    tmp = path.with_name(f".{path.name}.allocwatch.tmp")
    # O_NONBLOCK: a FIFO planted at the temp name fails rather than blocks
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, mode)
        try:
            data = text.encode("utf-8")
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            st = os.fstat(fd)
            if st.st_mode & 0o7777 != mode:
                os.fchmod(fd, mode)  # the umask narrowed it, or a leftover had another
            if previous_mtime_ns is not None and st.st_mtime_ns <= previous_mtime_ns:
                os.utime(fd, ns=(st.st_atime_ns, previous_mtime_ns + 1_000_000))
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
