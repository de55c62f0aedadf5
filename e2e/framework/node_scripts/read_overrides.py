"""Print {"exists", "doc", "mode"} for overrides.yaml at argv[1].

The document is parsed refusing duplicate keys, as the engine's strict
loader does, so a file the engine would reject cannot pass for a good one.
"""

import json
import os
import stat
import sys

import yaml


class StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=True) for k, _ in node.value]
        duplicates = {k for k in keys if keys.count(k) > 1}
        if duplicates:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate keys {sorted(map(str, duplicates))}", node.start_mark
            )
        return super().construct_mapping(node, deep)


path = sys.argv[1]
try:
    with open(path) as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        text = f.read()
except FileNotFoundError:
    print(json.dumps({"exists": False, "doc": None, "mode": None}))
else:
    doc = yaml.load(text, Loader=StrictLoader)
    print(json.dumps({"exists": True, "doc": doc, "mode": mode}))
