"""A long-lived NVML reader, run in its own process so the mock library's
environment (LD_LIBRARY_PATH, MOCK_NVML_*) is set before it loads.

    python -m tests.interop.nvml_probe

Prints one JSON line when ready ({"ready": N}), then answers each stdin line
with the memory of every device through nvmlDeviceGetMemoryInfo v1 and v2:
{"devices": [{"v1": {...}, "v2": {...}}, ...]}. The line `processes` is
answered instead with each device's compute processes, read as go-nvml and
nvidia-smi read them: {"processes": [[{pid, used_bytes, name}, ...], ...],
"pynvml": [...]}. Errors become {"error": "..."}.

The processes come from nvmlDeviceGetComputeRunningProcesses_v3 called
through ctypes with a sized buffer, and each name from
nvmlSystemGetProcessName with go-nvml's 256-byte buffer. pynvml's own wrapper
first asks for the count alone (no buffer); the mock answers that with
SUCCESS where real NVML answers INSUFFICIENT_SIZE, and pynvml takes SUCCESS
for "no processes". What the wrapper returns is reported beside, as "pynvml".

The line `activity` is answered with each device's utilization, power draw
and temperature, and its processes' utilization samples:
{"activity": [{"gpu", "memory", "power_mw", "temperature_c",
"processes": [{pid, sm, mem}, ...]}, ...]}.
"""

from __future__ import annotations

import ctypes
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


# go-nvml's SYSTEM_PROCESS_NAME_BUFFER_SIZE
NAME_BUFFER = 256
SIZED_BUFFER = 64


def processes(count: int) -> dict[str, Any]:
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetComputeRunningProcesses_v3")
    name_fn = pynvml._nvmlGetFunctionPointer("nvmlSystemGetProcessName")
    per_device, wrapper = [], []
    for i in range(count):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        n = ctypes.c_uint(SIZED_BUFFER)
        buffer = (pynvml.c_nvmlProcessInfo_v3_t * SIZED_BUFFER)()
        pynvml._nvmlCheckReturn(fn(handle, ctypes.byref(n), buffer))
        entries = []
        for info in buffer[: n.value]:
            name = ctypes.create_string_buffer(NAME_BUFFER)
            ret = name_fn(ctypes.c_uint(info.pid), name, ctypes.c_uint(NAME_BUFFER))
            entries.append(
                {
                    "pid": info.pid,
                    "used_bytes": info.usedGpuMemory,
                    "name": name.value.decode() if ret == pynvml.NVML_SUCCESS else ret,
                }
            )
        per_device.append(entries)
        wrapper.append(len(pynvml.nvmlDeviceGetComputeRunningProcesses_v3(handle)))
    return {"processes": per_device, "pynvml": wrapper}


def process_samples(handle: Any) -> list[Any]:
    """nvmlDeviceGetProcessUtilization with a sized buffer: pynvml's wrapper asks for
    the count alone first, and takes the mock's SUCCESS for none as an error."""
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetProcessUtilization")
    n = ctypes.c_uint(SIZED_BUFFER)
    buffer = (pynvml.c_nvmlProcessUtilizationSample_t * SIZED_BUFFER)()
    pynvml._nvmlCheckReturn(fn(handle, buffer, ctypes.byref(n), ctypes.c_ulonglong(0)))
    return list(buffer[: n.value])


def activity(count: int) -> dict[str, Any]:
    out = []
    for i in range(count):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
        samples = process_samples(handle)
        out.append(
            {
                "gpu": rates.gpu,
                "memory": rates.memory,
                "power_mw": pynvml.nvmlDeviceGetPowerUsage(handle),
                "temperature_c": pynvml.nvmlDeviceGetTemperature(
                    handle, pynvml.NVML_TEMPERATURE_GPU
                ),
                "processes": [{"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil} for s in samples],
            }
        )
    return {"activity": out}


ANSWERS = {"processes": processes, "activity": activity}


def main() -> None:
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as exc:
        print(json.dumps({"error": f"init: {exc}"}), flush=True)
        return
    print(json.dumps({"ready": count}), flush=True)
    for line in sys.stdin:
        try:
            out = ANSWERS.get(line.strip(), snapshot)(count)
        except pynvml.NVMLError as exc:
            out = {"error": str(exc)}
        print(json.dumps(out), flush=True)
    pynvml.nvmlShutdown()


if __name__ == "__main__":
    main()
