"""Claims → the NVML process list of each claimed device. Pure: no I/O, no clock.

Each claim on a device with a reading becomes one compute process there:

* `name` is `<namespace>/<pod>/<container>`, cut to NAME_MAX_BYTES of UTF-8
  (never inside a character). NVML's nvmlSystemGetProcessName crops a name
  to the caller's buffer, and go-nvml's buffer (SYSTEM_PROCESS_NAME_BUFFER_SIZE)
  holds 255 bytes and a NUL; the mock instead answers INSUFFICIENT_SIZE to a
  name that does not fit, so a longer name would be no name at all there.
* `used_memory_mib` is the device's `used_bytes` shared equally among its
  claims, each share rounded down to whole MiB: the entries never add up to
  more than `used_bytes`, and a clamped device's claims split its aperture.
* `pid` is synthetic and stable: PID_BASE + (the 8-byte blake2b digest,
  `digest_size=8`, of the claim's identity, as a big-endian integer) mod
  PID_SPAN. The identity is namespace, pod, container, resource name and
  device id, NUL-separated. The range lies above any Linux pid (the kernel
  caps them at 2^22) and within eight digits, the most nvidia-smi's process
  table prints whole; real processes therefore never share it. On a
  collision, claims are taken in order of their identity and each moves to
  the next free pid (wrapping within the range), so no two claims on the
  node share a pid; nvmlSystemGetProcessName looks a pid up on every
  device, so node-wide is what keeps its answer right.

The devices a claim lands on are the ones `reconcile` placed it on: matching
ids to devices here as well would be a second copy of those rules, free to
drift from the one that moves memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from allocwatch.claims import Claim
from allocwatch.reconcile import Reconciliation

PID_BASE = 10_000_000
PID_SPAN = 90_000_000  # so every pid has exactly eight digits
NAME_MAX_BYTES = 255
MIB = 2**20
COMPUTE = "C"

ProcessEntry = dict[str, Any]  # {pid, type, name, used_memory_mib}, as the engine reads it


def identity(claim: Claim) -> str:
    return "\0".join(
        (claim.namespace, claim.pod, claim.container, claim.resource_name, claim.device_id)
    )


def hashed_pid(claim: Claim) -> int:
    digest = hashlib.blake2b(identity(claim).encode("utf-8"), digest_size=8).digest()
    return PID_BASE + int.from_bytes(digest, "big") % PID_SPAN


def assign_pids(claims: Sequence[Claim]) -> list[int]:
    """The pid of each claim, in the order given; distinct, whatever the order."""
    pids = [0] * len(claims)
    taken: set[int] = set()
    for position in sorted(range(len(claims)), key=lambda n: identity(claims[n])):
        pid = hashed_pid(claims[position])
        while pid in taken:
            pid = PID_BASE + (pid - PID_BASE + 1) % PID_SPAN
        taken.add(pid)
        pids[position] = pid
    return pids


def process_name(claim: Claim) -> str:
    """`<namespace>/<pod>/<container>`, cut to NAME_MAX_BYTES without splitting a character."""
    name = f"{claim.namespace}/{claim.pod}/{claim.container}"
    return name.encode("utf-8")[:NAME_MAX_BYTES].decode("utf-8", errors="ignore")


def share_mib(used_bytes: int, claims: int) -> int:
    """One of `claims` equal shares of `used_bytes`, in whole MiB (rounded down)."""
    return used_bytes // claims // MIB if claims else 0


def process_lists(rec: Reconciliation) -> dict[int, list[ProcessEntry]]:
    """The process list of every device that has a reading and claims, keyed by index.

    Entries are in order of claim identity, so a List in another order
    changes nothing. A device without claims is absent: the profile's own
    list is what it shows.
    """
    located = [(claim, [i for i in where if i in rec.readings]) for claim, where in rec.placed]
    held = sorted(((c, where) for c, where in located if where), key=lambda h: identity(h[0]))
    placed: dict[int, list[tuple[Claim, int]]] = {}
    for (claim, where), pid in zip(held, assign_pids([c for c, _ in held]), strict=True):
        for index in where:
            placed.setdefault(index, []).append((claim, pid))
    return {
        index: [
            {
                "pid": pid,
                "type": COMPUTE,
                "name": process_name(claim),
                "used_memory_mib": share_mib(rec.readings[index].used_bytes, len(on_device)),
            }
            for claim, pid in on_device
        ]
        for index, on_device in sorted(placed.items())
    }
