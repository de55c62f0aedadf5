"""Print [status, body] of /readyz on the watcher's port argv[1]."""

import json
import sys
import urllib.error
import urllib.request

try:
    with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=5) as response:
        print(json.dumps([response.status, response.read().decode().strip()]))
except urllib.error.HTTPError as refused:
    print(json.dumps([refused.code, refused.read().decode().strip()]))
