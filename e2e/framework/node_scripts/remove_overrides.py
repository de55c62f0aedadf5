"""Delete overrides.yaml argv[1] (what an nvml-mock restart does) and time its return.

Polls every 5 ms for up to argv[2] seconds and prints
{"restored_after": seconds or null, "doc": the restored document}.
"""

import json
import os
import sys
import time

import yaml

path, timeout = sys.argv[1], float(sys.argv[2])
os.remove(path)
start = time.monotonic()
result = {"restored_after": None, "doc": None}
while time.monotonic() - start < timeout:
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        time.sleep(0.005)
        continue
    result = {"restored_after": time.monotonic() - start, "doc": yaml.safe_load(text)}
    break
print(json.dumps(result))
