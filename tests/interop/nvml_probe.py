"""A long-lived NVML reader, run in its own process so the mock library's
environment (LD_LIBRARY_PATH, MOCK_NVML_*) is set before it loads.

    python -m tests.interop.nvml_probe

Prints one JSON line when ready ({"ready": N}), then answers each stdin line
with the memory of every device through nvmlDeviceGetMemoryInfo v1 and v2:
{"devices": [{"v1": {...}, "v2": {...}}, ...]}. Errors become {"error": "..."}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pynvml


def snapshot(count: int) -> dict[str, Any]:
    devices = []
    for i in range(count):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        v1 = pynvml.nvmlDeviceGetMemoryInfo(handle)
        v2 = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        devices.append(
            {
                "uuid": pynvml.nvmlDeviceGetUUID(handle),
                "v1": {"total": v1.total, "free": v1.free, "used": v1.used},
                "v2": {
                    "version": v2.version,
                    "total": v2.total,
                    "reserved": v2.reserved,
                    "free": v2.free,
                    "used": v2.used,
                },
            }
        )
    return {"devices": devices}


def main() -> None:
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        print(json.dumps({"error": f"init: {exc}"}), flush=True)
        return
    print(json.dumps({"ready": count}), flush=True)
    for _ in sys.stdin:
        try:
            out = snapshot(count)
        except pynvml.NVMLError as exc:
            out = {"error": str(exc)}
        print(json.dumps(out), flush=True)
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
