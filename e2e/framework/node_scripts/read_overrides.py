"""Print {"exists": bool, "doc": <parsed overrides.yaml>} for the path in argv[1]."""

import json
import sys

import yaml

path = sys.argv[1]
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    print(json.dumps({"exists": False, "doc": None}))
else:
    print(json.dumps({"exists": True, "doc": yaml.safe_load(text)}))
