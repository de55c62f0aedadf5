"""Hold nvml-mock's flock on overrides.yaml argv[1] until the file argv[2] appears.

What a slow `nvml-mock-ctl` does: lock the sibling `.lock` file, take its
time, then write. While holding (at most argv[3] seconds) it checks every
20 ms that nobody changes overrides.yaml; on release it deep-merges the JSON
patch argv[4] under the same lock (the write an nvml-mock-ctl call makes).
Prints {"changed_while_held": bool, "held_for": seconds, "doc": the result}.
"""

import fcntl
import json
import os
import sys
import time

import yaml


def snapshot(path):
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            return st.st_ino, st.st_mtime_ns, f.read()
    except FileNotFoundError:
        return None


def merge(into, patch):
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


path, release, limit, patch = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
try:
    start = time.monotonic()
    before = snapshot(path)
    changed = False
    while not os.path.exists(release) and time.monotonic() - start < limit:
        changed = changed or snapshot(path) != before
        time.sleep(0.02)
    changed = changed or snapshot(path) != before
    held_for = time.monotonic() - start
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    merge(doc, patch)
    tmp = f"{path}.hold-lock.tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(doc, f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
finally:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
print(json.dumps({"changed_while_held": changed, "held_for": held_for, "doc": doc}))
