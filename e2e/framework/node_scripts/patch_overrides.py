"""Deep-merge the JSON patch argv[2] into overrides.yaml argv[1], under nvml-mock's flock.

This is what `nvml-mock-ctl` does for a human's override: lock the sibling
`.lock` file, load, merge, write a temp file in the same directory, rename.
A null in the patch deletes that key.
"""

import fcntl
import json
import os
import sys
import tempfile

import yaml


def merge(into, patch):
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


path, patch = sys.argv[1], json.loads(sys.argv[2])
fd = os.open(path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
try:
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except FileNotFoundError:
        doc = {}
    merge(doc, patch)
    doc.setdefault("version", 1)
    tmp_fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".overrides-", suffix=".tmp")
    with os.fdopen(tmp_fd, "w") as f:
        yaml.safe_dump(doc, f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
finally:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
print(json.dumps({"doc": doc}))
