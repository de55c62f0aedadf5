"""Print one sample's value (argv[2], as /metrics spells it) from the watcher's port argv[1]."""

import json
import sys
import urllib.request

port, sample = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
    body = response.read().decode()
values = [
    float(line.rpartition(" ")[2])
    for line in body.splitlines()
    if line.rpartition(" ")[0] == sample
]
if not values:
    sys.exit(f"no sample {sample} in /metrics")
print(json.dumps(values[0]))
