"""Change overrides.yaml argv[1] as argv[2] says, under nvml-mock's flock.

argv[2] is JSON, either {"merge": patch}: deep-merge the patch, a null
deleting its key, which is what `nvml-mock-ctl` does for a human's override;
or {"replace": document}: put that document in place, keeping only the
memory readings the file holds now (the watcher's, which it may still be
publishing). Either way: lock the sibling `.lock` file, load, change, write
a temp file in the same directory, rename.

With argv[3] (a path) and argv[4] (seconds), it first holds the lock until
that path exists, at most that long, as a slow `nvml-mock-ctl` would, and
reports whether anybody changed overrides.yaml meanwhile.
Prints {"doc": the result, "changed_while_held": bool, "held_for": seconds}.
"""

import fcntl
import json
import os
import sys
import tempfile
import time

import yaml


def merge(into, patch):
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def with_readings_of(document, current):
    """`document`, with the used/free bytes `current` holds for each device."""
    buckets = current.get("devices")
    for index, bucket in (buckets if isinstance(buckets, dict) else {}).items():
        memory = bucket.get("memory") if isinstance(bucket, dict) else None
        if not isinstance(memory, dict):
            continue
        readings = {k: v for k, v in memory.items() if k in ("used_bytes", "free_bytes")}
        if readings:
            if not isinstance(document.get("devices"), dict):
                document["devices"] = {}
            if not isinstance(document["devices"].get(index), dict):
                document["devices"][index] = {}
            target = document["devices"][index]
            if not isinstance(target.get("memory"), dict):
                target["memory"] = {}
            target["memory"].update(readings)
    return document


def snapshot(path):
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            return st.st_ino, st.st_mtime_ns, f.read()
    except FileNotFoundError:
        return None


path, change = sys.argv[1], json.loads(sys.argv[2])
release, limit = (sys.argv[3], float(sys.argv[4])) if len(sys.argv) > 4 else (None, 0.0)
fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
try:
    start = time.monotonic()
    before = snapshot(path)
    while release and not os.path.exists(release) and time.monotonic() - start < limit:
        time.sleep(0.02)
    # Every write replaces the file, so a write during the hold shows in its
    # inode or mtime even if the content came back the same.
    changed = snapshot(path) != before
    held_for = time.monotonic() - start
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except FileNotFoundError:
        doc = {}
    if "replace" in change:
        doc = with_readings_of(change["replace"], doc)
    else:
        merge(doc, change["merge"])
    doc.setdefault("version", 1)
    tmp_fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".overrides-", suffix=".tmp")
    with os.fdopen(tmp_fd, "w") as f:
        yaml.safe_dump(doc, f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
finally:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
print(json.dumps({"doc": doc, "changed_while_held": changed, "held_for": held_for}))
