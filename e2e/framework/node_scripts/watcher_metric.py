"""Print one sample's value (argv[2], as /metrics spells it) from the watcher's port argv[1].

0 when the sample is absent (a counter not incremented yet).
"""

import json
import sys
import urllib.request

port, sample = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
    body = response.read().decode()
value = 0.0
for line in body.splitlines():
    name, _, number = line.rpartition(" ")
    if name == sample:
        value = float(number)
print(json.dumps(value))
