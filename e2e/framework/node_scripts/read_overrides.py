"""Print {"exists", "doc", "mode"} for overrides.yaml at argv[1].

The document is parsed by the watcher's own strict loader (the allocwatch
image has it), which refuses what the engine refuses: a file the engine
would reject fails the read instead of passing for a good one.
"""

import json
import os
import stat
import sys

from allocwatch.document import parse_document

path = sys.argv[1]
try:
    with open(path) as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        text = f.read()
except FileNotFoundError:
    print(json.dumps({"exists": False, "doc": None, "mode": None}))
else:
    print(json.dumps({"exists": True, "doc": parse_document(text), "mode": mode}))
