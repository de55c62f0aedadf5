"""The nvml-mock override document: strict load, merge, atomic publish.

Contract (shared with the engine and `nvml-mock-ctl`):
* Writers hold an exclusive flock on the sibling `<file>.lock` across
  load → merge → write, and never delete that lock file.
* The document is strict: top-level keys are only `version` (an int), `all`
  and `devices`; duplicate keys are errors, and so are aliases that contain
  themselves or expand the document past MAX_EXPANDED_NODES. A document we
  cannot parse is never overwritten: it may be a human's edit, and the engine
  keeps serving its last good copy meanwhile.
* We own only `devices["<i>"].memory.{used_bytes,free_bytes}`; every other key
  is preserved. Byte counts are written as ints (exact in float64).
* Writes go to a temp file in the same directory, chmod 0644, then rename,
  because the engine would accept a half-written number.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import yaml

from allocwatch import goyaml
from allocwatch.files import read_regular_file
from allocwatch.reconcile import MemoryReading

log = logging.getLogger(__name__)

TOP_LEVEL_KEYS = frozenset({"version", "all", "devices"})
MEMORY_KEYS = ("used_bytes", "free_bytes")
FILE_MODE = 0o644
# How often a publish retries a lock another writer holds.
LOCK_RETRY_SECONDS = 0.05

Document = dict[str, Any]


class DocumentError(ValueError):
    """The file on disk is not a valid override document; it is left alone."""


class PublishError(RuntimeError):
    """This publish did not happen (lock timeout, I/O error, bad document)."""


_DumperBase: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _StrictLoader(goyaml.GoYamlLoader):
    """go-yaml v2's scalars, and keys checked as UnmarshalStrict checks them.

    Keys get the text sigs.k8s.io/yaml gives them (`1:` is "1", `y:` is
    "true"). A key may appear once, counting those a merge (`<<: *base`)
    brings in: strict go-yaml refuses `{<<: *base, x: 2}` when base has `x`.
    A null key, and an int key beyond int64, are keys sigs.k8s.io/yaml cannot
    turn into text, so the engine refuses those files too.

    Timestamps stay strings, as the engine reads them; a string survives our
    round trip unchanged (the dumper quotes it again).
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # With the merges expanded, a key set twice, directly or through a
        # merge, appears twice. Keyed by the engine's names from the start: in
        # a plain dict False, 0 and -0.0 (or True and 1) would become one key.
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            mark = key_node.start_mark
            if isinstance(key, int) and not isinstance(key, bool) and not goyaml.is_int64(key):
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key} is out of range", mark
                )
            key = goyaml.key_text(key)  # so `1:` and `"1":` are the same key, as in Go
            if key is None:
                raise yaml.constructor.ConstructorError(None, None, "a null key", mark)
            if not isinstance(key, str):
                # a map or list as a key (go-yaml refuses those), or binary
                # that is not text; every key must be text for us to sort and write
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is not one the engine can name as text", mark
                )
            if key in mapping:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_SCALAR_RESOLVER = yaml.resolver.Resolver()  # the implicit tags SafeDumper uses


@functools.lru_cache(maxsize=4096)
def _scalar_tag(value: str, implicit: tuple[bool, bool]) -> str:
    return _SCALAR_RESOLVER.resolve(yaml.ScalarNode, value, implicit)


class _Dumper(_DumperBase):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        # Never write anchors: parse_document rebuilds every node, so nothing
        # is shared, and skipping the check saves a tenth of a render.
        return True

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        # The serializer asks this twice per scalar, and the answer depends
        # only on the text; the same keys recur on every write, and regex
        # matching them each time is a fifth of a render.
        if kind is yaml.ScalarNode:
            return _scalar_tag(value, tuple(implicit))
        return super().resolve(kind, value, implicit)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # A string the engine would read as something else unquoted (`y`, `1e3`,
    # `0o17`; PyYAML's YAML 1.1 rules leave those plain) is quoted, as Go
    # writers do: read as a bool or number, it would break that device's overrides.
    if goyaml.resolve_plain(value)[0] != goyaml.STR:
        return dumper.represent_scalar(goyaml.STR, value, style='"')
    return dumper.represent_str(value)


_Dumper.add_representer(str, _represent_str)


# go-yaml refuses a document whose aliases expand it far beyond its text, and
# so does the engine; we rebuild every aliased map as its own copy, so without
# a bound a few lines of aliases would take our memory.
MAX_EXPANDED_NODES = 100_000
# Our YAML emitter recurses per level and gives up near 330; real documents
# are five levels deep. A deeper one is refused (and left alone) at the load.
MAX_DEPTH = 100


def _normalise_keys(value: Any) -> Any:
    """Copy of a parsed document in which no map or list is shared.

    Raises DocumentError for a document that aliases expand past
    MAX_EXPANDED_NODES, or one nested past MAX_DEPTH. (goyaml.load has refused
    an alias that contains itself.)
    """
    budget = MAX_EXPANDED_NODES

    def rebuild(node: Any, depth: int) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0:
            raise DocumentError(f"aliases expand the document past {MAX_EXPANDED_NODES} nodes")
        if isinstance(node, float) and not math.isfinite(node):
            # the engine reads the file through JSON, which has no inf or nan
            raise DocumentError(f"{node!r}: the engine cannot read a non-finite number")
        if not isinstance(node, dict | list):
            return node
        if depth >= MAX_DEPTH:
            raise DocumentError(f"nested too deeply to rewrite (over {MAX_DEPTH} levels)")
        if isinstance(node, list):
            return [rebuild(v, depth + 1) for v in node]
        return {k: rebuild(v, depth + 1) for k, v in node.items()}  # keys: named by the loader

    return rebuild(value, 0)


def parse_document(text: str) -> Document:
    """Strictly parse override YAML (or JSON). A blank file is an empty document."""
    try:
        doc = goyaml.load(text, _StrictLoader)
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise DocumentError(f"the document must be a mapping, not {type(doc).__name__}")
        doc = _normalise_keys(doc)
    except yaml.YAMLError as exc:
        raise DocumentError(f"not valid YAML: {exc}") from exc
    except RecursionError:
        raise DocumentError("nested too deeply to read") from None
    respelled = sorted(
        k
        for k in doc
        if isinstance(k, str) and k not in TOP_LEVEL_KEYS and k.lower() in TOP_LEVEL_KEYS
    )
    if respelled:
        # Go matches field names case-insensitively, so the engine reads these;
        # we do not merge spellings and rewrite, so the file is left to a human.
        raise DocumentError(
            f"top-level key(s) {', '.join(respelled)}: the engine reads them, but allocwatch "
            "rewrites only the lower-case spellings all, devices and version"
        )
    unknown = sorted(str(k) for k in doc if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise DocumentError(
            f"unknown top-level key(s) {', '.join(unknown)} (allowed: all, devices, version)"
        )
    version = doc.get("version")
    if version is not None:
        number = goyaml.json_int(version)  # what Go's int field makes of it
        if number is None or not goyaml.is_int64(number):
            raise DocumentError(f"`version` must be an integer, not {version!r}")
        doc["version"] = number
    for key in ("all", "devices"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise DocumentError(f"`{key}` must be a mapping, not {type(doc[key]).__name__}")
    for name, bucket in (doc.get("devices") or {}).items():
        if bucket is not None and not isinstance(bucket, dict):
            raise DocumentError(f"devices[{name!r}] must be a mapping")
    return doc


def render_document(doc: Mapping[str, Any]) -> str:
    return yaml.dump(dict(doc), Dumper=_Dumper, default_flow_style=False, sort_keys=True)


# Stands in for each integer when a document's shape is rendered: plain text
# that YAML writes as it is, one token, so never wrapped or quoted.
_INTEGER_MARK = "allocwatch-integer-5b0d"


def _shape(node: Any, integers: list[int]) -> Any:
    """A key equal for two documents that render alike but for their integers.

    Appends the integers to `integers` in the order the render writes them.
    Leaves keep their type, so `true`, `1.0` and `1` never share a shape, and
    floats compare by their text (`-0.0` is not `0.0`).
    """
    kind = type(node)
    if kind is int:
        integers.append(node)
        return int
    if kind is dict:
        # sorted, as render_document writes them; keys are text (see _StrictLoader).
        # Integer values inline: this runs for every node of every write, and
        # most values are our byte counts.
        items = []
        for key in sorted(node):
            value = node[key]
            if type(value) is int:
                integers.append(value)
                items.append((key, int))
            else:
                items.append((key, _shape(value, integers)))
        return dict, tuple(items)
    if kind is list:
        return list, tuple([_shape(item, integers) for item in node])
    return kind, repr(node) if kind is float else node


def _marked(node: Any) -> Any:
    """`node` with every integer replaced by _INTEGER_MARK."""
    kind = type(node)
    if kind is int:
        return _INTEGER_MARK
    if kind is dict:
        return {k: _marked(v) for k, v in node.items()}
    if kind is list:
        return [_marked(item) for item in node]
    return node


class DocumentRenderer:
    """render_document, reusing the last render when only integers changed.

    A write nearly always changes only our byte counts, and PyYAML's
    representer and emitter are most of a writing poll's own CPU. So the
    shape of the last document is rendered once, with a mark in place of each
    integer, and a document of the same shape is that text with its integers
    filled in: the same bytes as render_document, in a fifth of the time.
    """

    def __init__(self) -> None:
        self._shape: Any = None
        self._template: str | None = None

    def __call__(self, doc: Mapping[str, Any]) -> str:
        integers: list[int] = []
        shape = _shape(dict(doc), integers)
        if shape != self._shape:
            self._shape, self._template = shape, None
            text = render_document(_marked(dict(doc)))
            # Text of someone else's that contains the mark: render in full.
            if text.count(_INTEGER_MARK) == len(integers):
                self._template = text.replace("%", "%%").replace(_INTEGER_MARK, "%d")
        if self._template is None:
            return render_document(doc)
        return self._template % tuple(integers)


def merge_readings(doc: Mapping[str, Any], readings: Mapping[int, MemoryReading]) -> Document:
    """Return a copy of `doc` with our two memory keys set for each reading (pure).

    Missing, null or non-map buckets and `memory` blocks become maps; every
    other key, and every other device, is kept. Only the maps on the path to a
    changed key are copied; the rest is shared with `doc`, which neither this
    nor anything else here modifies.
    """
    out: Document = dict(doc)
    if not readings:
        return out
    if not isinstance(out.get("version"), int):
        out["version"] = 1  # what Go writers emit
    devices = out.get("devices")
    devices = out["devices"] = dict(devices) if isinstance(devices, dict) else {}
    for index, reading in readings.items():
        key = str(index)
        bucket = devices.get(key)
        bucket = devices[key] = dict(bucket) if isinstance(bucket, dict) else {}
        memory = bucket.get("memory")
        memory = bucket["memory"] = dict(memory) if isinstance(memory, dict) else {}
        memory["used_bytes"] = int(reading.used_bytes)
        memory["free_bytes"] = int(reading.free_bytes)
    return out


def remove_readings(doc: Mapping[str, Any], indices: Iterable[int]) -> Document:
    """Return a copy without our memory keys for `indices`, pruning maps left empty.

    Copies only the maps it changes, as merge_readings does.
    """
    out: Document = dict(doc)
    devices = out.get("devices")
    if not isinstance(devices, dict):
        return out
    devices = out["devices"] = dict(devices)
    for index in indices:
        key = str(index)
        bucket = devices.get(key)
        memory = bucket.get("memory") if isinstance(bucket, dict) else None
        if not isinstance(memory, dict) or not any(k in memory for k in MEMORY_KEYS):
            continue
        bucket = dict(bucket)
        memory = {k: v for k, v in memory.items() if k not in MEMORY_KEYS}
        if memory:
            bucket["memory"] = memory
        else:
            del bucket["memory"]
        if bucket:
            devices[key] = bucket
        else:
            del devices[key]
            if not devices:
                del out["devices"]
    return out


def holds_readings(
    doc: Mapping[str, Any], readings: Mapping[int, MemoryReading], absent: Iterable[int]
) -> bool:
    """True when `doc` already shows `readings` and none of our keys for `absent` (pure).

    The cheap check behind write-only-on-change: equivalent to comparing the
    merged document with `doc`, without copying it.
    """
    devices = doc.get("devices")
    devices = devices if isinstance(devices, dict) else {}
    if readings and not isinstance(doc.get("version"), int):
        return False
    for index, reading in readings.items():
        bucket = devices.get(str(index))
        memory = bucket.get("memory") if isinstance(bucket, dict) else None
        if not isinstance(memory, dict):
            return False
        for key, value in (("used_bytes", reading.used_bytes), ("free_bytes", reading.free_bytes)):
            current = memory.get(key)
            if type(current) is not int or current != value:
                return False
    for index in absent:
        bucket = devices.get(str(index))
        memory = bucket.get("memory") if isinstance(bucket, dict) else None
        if isinstance(memory, dict) and any(k in memory for k in MEMORY_KEYS):
            return False
    return True


def read_document(path: Path) -> Document | None:
    """The parsed document, or None when the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 text: {exc}") from exc
    return parse_document(text)


def write_atomic(path: Path, text: str, previous_mtime_ns: int | None = None) -> None:
    """Temp file in the same directory, 0644, rename. The caller holds the lock.

    The temp file's name is fixed, `.<name>.allocwatch.tmp`: only a lock
    holder writes it, so no two writers share it, and a write cut short by a
    crash leaves one file that the next write reuses rather than a new
    random one each time (and a random name costs a third of the write).

    The engine notices a change only by mtime or size. When a same-size write
    lands within one timestamp tick of the previous one, give it a later mtime
    so the change cannot be missed.
    """
    tmp = path.with_name(f".{path.name}.allocwatch.tmp")
    # O_NONBLOCK: a FIFO planted at the temp name fails rather than blocks
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, FILE_MODE)
        try:
            data = text.encode("utf-8")
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            st = os.fstat(fd)
            if st.st_mode & 0o7777 != FILE_MODE:
                os.fchmod(fd, FILE_MODE)  # the umask narrowed it, or a leftover had another
            if previous_mtime_ns is not None and st.st_mtime_ns <= previous_mtime_ns:
                os.utime(fd, ns=(st.st_atime_ns, previous_mtime_ns + 1_000_000))
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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
    """

    def __init__(self, path: Path, lock_timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.lock_path = Path(str(self.path) + ".lock")
        self.lock_timeout = lock_timeout
        self.writes = 0
        self._cache_text: str | None = None
        self._cache_doc: Document | None = None
        self.render = DocumentRenderer()

    def _current(self) -> tuple[Document | None, int | None]:
        """The document on disk (None when absent) and its mtime in ns."""
        try:
            raw, mtime_ns = read_regular_file(self.path)
        except FileNotFoundError:
            return None, None
        except OSError as exc:  # a directory, a FIFO, no permission, an I/O error
            raise PublishError(f"load {self.path}: {exc.strerror or exc}") from exc
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"not UTF-8 text: {exc}") from exc
        if text != self._cache_text:
            self._cache_doc = parse_document(text)
            self._cache_text = text
        return self._cache_doc, mtime_ns

    def publish(
        self,
        readings: Mapping[int, MemoryReading],
        stop: threading.Event | None = None,
        remove: Iterable[int] = (),
    ) -> PublishResult:
        """Merge `readings`, and drop our keys for `remove` (devices gone from the profile)."""
        gone = [i for i in remove if i not in readings]

        def change(doc: Document) -> Document:
            merged = merge_readings(doc, readings)
            return remove_readings(merged, gone) if gone else merged

        return self._update(
            change,
            lambda doc: holds_readings(doc, readings, gone),
            stop,
            # With no reading (no profile device has memory) there is nothing
            # to publish: an absent file stays absent rather than becoming `{}`.
            create=bool(readings),
        )

    def retract(self, indices: Iterable[int], stop: threading.Event | None = None) -> PublishResult:
        wanted = list(indices)
        return self._update(
            lambda doc: remove_readings(doc, wanted),
            lambda doc: holds_readings(doc, {}, wanted),
            stop,
            create=False,
        )

    def _update(
        self,
        change: Callable[[Document], Document],
        satisfied: Callable[[Document], bool],
        stop: threading.Event | None,
        create: bool = True,
    ) -> PublishResult:
        def needed() -> tuple[bool, Document | None, int | None]:
            try:
                doc, mtime_ns = self._current()
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
        with self._locked(stop):
            wanted, doc, mtime_ns = needed()  # again: another writer may have been first
            if not wanted:
                return PublishResult(wrote=False)
            merged = change(doc if doc is not None else {})
            text = self.render(merged)
            try:
                write_atomic(self.path, text, previous_mtime_ns=mtime_ns)
            except OSError as exc:
                raise PublishError(f"write {self.path}: {exc}") from exc
            self.writes += 1
            # What we wrote parses back to `merged`, so the next poll need not
            # parse it again unless someone else changes the file.
            self._cache_text, self._cache_doc = text, merged
            return PublishResult(wrote=True)

    @contextlib.contextmanager
    def _locked(self, stop: threading.Event | None) -> Iterator[None]:
        """Hold the flock on the sidecar lock file, as nvml-mock-ctl does.

        flock on a descriptor we open, never a marker file: a filesystem
        without flock fails here rather than excluding only ourselves. The
        file is opened per publish, so a lock file re-created by an nvml-mock
        restart is the one locked. filelock's own lock object does the same
        with more bookkeeping: 0.5-0.7 ms a publish, against 0.07 ms here.
        """
        try:
            fd = _open_lock_file(self.lock_path)
        except OSError as exc:
            raise PublishError(f"lock {self.lock_path}: {exc.strerror or exc}") from exc
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    if filelock.lock_descriptor(fd, blocking=False):
                        break
                except OSError as exc:
                    raise PublishError(f"lock {self.lock_path}: {exc.strerror or exc}") from exc
                if stop is not None and stop.is_set():
                    raise PublishError(f"lock {self.lock_path}: cancelled by shutdown")
                if time.monotonic() >= deadline:
                    raise PublishError(
                        f"lock {self.lock_path}: still held by another writer after "
                        f"{self.lock_timeout:g}s"
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


def _open_lock_file(path: Path) -> int:
    """A descriptor on the lock file, creating it 0644 (whatever the umask) if absent."""
    flags = os.O_RDWR | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:  # another writer created it first
        return os.open(path, flags)
    os.fchmod(fd, FILE_MODE)
    return fd
