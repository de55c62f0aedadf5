"""Publishes our keys into the override file, writing only when they change."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from allocwatch.document import FILE_MODE, Document, DocumentError, count_nodes, parse_document
from allocwatch.goyaml import MAX_NODES
from allocwatch.ownedkeys import ABSENT, Publication, apply, holds
from allocwatch.render import DocumentRenderer
from allocwatch.sharedfile import (
    MAX_DOCUMENT_BYTES,
    FileTooLarge,
    LockError,
    lock_path_for,
    locked,
    read_regular_file,
    write_atomic,
)
from allocwatch.shutdown import Stop


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


def _interruptible(stop: Stop | None) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if stop is None else stop.interruptible()


class PublishError(RuntimeError):
    """This publish did not happen (lock timeout, I/O error, bad document)."""


@dataclass(frozen=True)
class PublishResult:
    wrote: bool


class OverridesPublisher:
    """Publishes readings into one override file, writing only on change.

    An idle poll reads the (small) file and compares bytes with the last
    parse; it parses only when they differ, and takes the lock only when a
    write is needed: the file is only ever replaced by rename, so an unlocked
    read always sees a whole document. A poll with new readings reads the
    file only under the lock. Comparing content, not stat identity,
    matters because two same-size rewrites within one timestamp tick can reuse
    an inode number and look unchanged.

    A refused document is the exception: it is remembered by its stat
    identity and not read or parsed again until that changes, since a file
    near the size bound costs far more to parse than to stat. A refused file
    is never written, so only another writer changes it, and a rename by
    that writer changes the identity.
    """

    def __init__(self, path: Path, lock_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.lock_path = lock_path_for(self.path)
        self.lock_timeout = lock_timeout
        self._cache_text: str | None = None
        self._cache_doc: Document | None = None
        # (stat identity, reason) of the last document refused
        self._refused: tuple[tuple[int, ...], str] | None = None
        # The document and publication last found to agree
        self._shown: tuple[Document, Publication] | None = None
        self.render = DocumentRenderer()

    def _current(self, stop: Stop | None) -> tuple[Document | None, int | None]:
        """The document on disk (None when absent) and its mtime in ns.

        The parse is the one long step of a poll: `stop` may cut it short.
        """
        if self._refused is not None:
            identity, reason = self._refused
            try:
                if _identity(os.stat(self.path)) == identity:
                    raise DocumentError(reason)
            except OSError:
                pass  # gone or unreadable: the read below says which
        try:
            raw, st = read_regular_file(self.path)
        except FileNotFoundError:
            return None, None
        except FileTooLarge as exc:
            raise self._refuse(exc.stat, str(exc)) from None
        except OSError as exc:  # a directory, a FIFO, no permission, an I/O error
            raise PublishError(f"load {self.path}: {exc.strerror or exc}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._refuse(st, f"not UTF-8 text: {exc}") from exc
        if text != self._cache_text:
            try:
                with _interruptible(stop):
                    doc = parse_document(text)
            except DocumentError as exc:
                raise self._refuse(st, str(exc)) from exc
            self._cache_doc, self._cache_text = doc, text
        self._refused = None
        return self._cache_doc, st.st_mtime_ns

    def _refuse(self, st: os.stat_result, reason: str) -> DocumentError:
        self._refused = (_identity(st), reason)
        return DocumentError(reason)

    def document(self, stop: Stop | None = None) -> Document | None:
        """The document on disk, as the next publish would start from; None when absent."""
        try:
            return self._current(stop)[0]
        except DocumentError as exc:
            raise PublishError(f"load {self.path}: {exc}") from exc

    def publish(self, wanted: Publication, stop: Stop | None = None) -> PublishResult:
        """Make the file show `wanted` (ownedkeys), pins respected, writing only if it does not.

        An absent file is created only to set a key: removing ours from a
        file that is not there leaves it absent, rather than making it `{}`.
        """
        create = any(v is not ABSENT for keys in wanted.values() for v in keys.values())

        def satisfied(doc: Document) -> bool:
            # An idle poll asks again of the very document and publication
            # found to agree last time: the answer stands, whatever their size.
            if self._shown is not None and self._shown[0] is doc and self._shown[1] is wanted:
                return True
            if holds(doc, wanted):
                self._shown = (doc, wanted)
                return True
            return False

        return self._update(lambda doc: apply(doc, wanted), satisfied, stop, create)

    def _update(
        self,
        change: Callable[[Document], Document],
        satisfied: Callable[[Document], bool],
        stop: Stop | None,
        create: bool = True,
    ) -> PublishResult:
        def needed() -> tuple[bool, Document | None, int | None]:
            try:
                doc, mtime_ns = self._current(stop)
            except DocumentError as exc:
                raise PublishError(f"load {self.path}: {exc}; leaving it untouched") from exc
            if doc is None:
                return create, doc, mtime_ns
            return not satisfied(doc), doc, mtime_ns

        # Check without the lock first: the file is only ever replaced by
        # rename, so this read sees a whole document, and idle polls stay
        # off the lock that nvml-mock-ctl also takes. When the document last
        # seen lacks the change, a write is all but certain and the read
        # would only be repeated under the lock, so it is skipped.
        seen = self._cache_doc
        write_due = create and seen is not None and not satisfied(seen)
        if not write_due and not needed()[0]:
            return PublishResult(wrote=False)
        if not self.path.parent.is_dir():
            # Never create nvml-mock's directories (it may be uninstalled).
            raise PublishError(f"write {self.path}: directory {self.path.parent} does not exist")
        timeout = self.lock_timeout if stop is None else min(self.lock_timeout, stop.time_left())
        try:
            with locked(self.lock_path, FILE_MODE, timeout, stop):
                return self._write(change, needed, stop)
        except LockError as exc:
            raise PublishError(str(exc)) from exc

    def _write(
        self,
        change: Callable[[Document], Document],
        needed: Callable[[], tuple[bool, Document | None, int | None]],
        stop: Stop | None,
    ) -> PublishResult:
        wanted, doc, mtime_ns = needed()  # again: another writer may have been first
        if not wanted:
            return PublishResult(wrote=False)
        with _interruptible(stop):
            merged = change(doc if doc is not None else {})
            text = self.render(merged)
        size = len(text.encode("utf-8"))
        nodes = count_nodes(merged)
        if size > MAX_DOCUMENT_BYTES or nodes > MAX_NODES:
            # Never write what we would refuse to read: our block style can
            # outgrow a compact flow-style original, and our keys add nodes
            # to what a human wrote. Refused like a document too large to
            # read, until it changes.
            over = (
                f"{size} bytes, over allocwatch's bound of {MAX_DOCUMENT_BYTES}"
                if size > MAX_DOCUMENT_BYTES
                else f"{nodes} nodes, over allocwatch's bound of {MAX_NODES}"
            )
            reason = f"written out it would be {over}"
            with contextlib.suppress(OSError):
                self._refuse(os.stat(self.path), reason)
            raise PublishError(f"write {self.path}: {reason}; leaving it untouched")
        try:
            write_atomic(self.path, text, FILE_MODE, previous_mtime_ns=mtime_ns)
        except OSError as exc:
            raise PublishError(f"write {self.path}: {exc}") from exc
        # What we wrote parses back to `merged`, so the next poll need not
        # parse it again unless someone else changes the file.
        self._cache_text, self._cache_doc = text, merged
        return PublishResult(wrote=True)
