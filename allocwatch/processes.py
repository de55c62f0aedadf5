"""Claims → the NVML process list of each claimed device. Pure: no I/O, no clock.

Each claim on a device with a reading becomes one compute process there:

* `name` is `<namespace>/<pod>/<container>`, and `/<claim>` after it for a
  DRA claim. Control characters (C0, DEL, C1) and U+FFFE/U+FFFF become
  U+FFFD: NVML would cut a name at its NUL, and nvml-mock-ctl's YAML round
  trip writes the others raw and then refuses the file (NEL it turns into a
  space, which would cost a fix-up write after every ctl edit). The name is
  then cut to NAME_MAX_BYTES of UTF-8 (never inside a character): NVML's
  nvmlSystemGetProcessName crops a name to the caller's buffer, and
  go-nvml's holds 255 bytes and a NUL; the mock instead answers
  INSUFFICIENT_SIZE to a name that does not fit. Entries that would still
  share a name on one device (time-sliced replicas held by one container)
  are numbered `#2`, `#3`, ... in order of identity.
* `used_memory_mib` is the claim's part of the device's `used_bytes`: what it
  asked for (equal shares, unless its pod declared a load), in proportion when
  the device is full, rounded down to whole MiB. The entries never add up to
  more than `used_bytes`, and a clamped device's claims split its aperture.
* With activity, `sm_util` and `mem_util` are the claim's share of its GPU's
  utilization (activity.process_utilization), which `nvidia-smi pmon` reads.
* `pid` is synthetic: PID_BASE + (the 8-byte blake2b digest, `digest_size=8`,
  of the claim's identity, as a big-endian integer) mod PID_SPAN. The
  identity is namespace, pod, container, resource name and device id, and
  for a DRA claim also its claim namespace, name, pool and share id,
  NUL-separated. The range lies above any Linux pid (the kernel caps them at
  2^22) and within eight digits, the most nvidia-smi's process table prints
  whole. A claim keeps its pid for as long as it is listed (PidTable): on a
  collision only the newcomer moves, to the next free pid, so no two entries
  on the node share a pid (nvmlSystemGetProcessName looks a pid up on every
  device). After a restart, a claim whose entry (device and name) is still
  in the document takes that entry's pid back.
* A device lists at most MAX_PROCESSES_PER_DEVICE entries, about what
  nvidia-smi shows of a real GPU: past that, the claims last in identity
  order fold into one entry, `+<n> more claims`, holding their memory. What
  allocwatch adds to the document is bounded by design.

The devices a claim lands on are the ones `reconcile` placed it on: matching
ids to devices here as well would be a second copy of those rules.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from allocwatch.activity import Band, process_utilization
from allocwatch.claims import Claim, ClaimSource
from allocwatch.reconcile import Reconciliation

PID_BASE = 10_000_000
PID_SPAN = 90_000_000  # so every pid has exactly eight digits
NAME_MAX_BYTES = 255
MAX_PROCESSES_PER_DEVICE = 32
MIB = 2**20
COMPUTE = "C"

ProcessEntry = dict[str, Any]  # {pid, type, name, used_memory_mib}, as the engine reads it

# Lone surrogates too: no kubelet sends them (protobuf refuses them), but a
# name must never fail to encode.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def identity(claim: Claim) -> str:
    parts = [claim.namespace, claim.pod, claim.container, claim.resource_name, claim.device_id]
    if claim.source is ClaimSource.DRA:
        parts += [claim.claim_namespace, claim.claim_name, claim.pool, claim.share_id or ""]
    return "\0".join(parts)


def hashed_pid(key: str) -> int:
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return PID_BASE + int.from_bytes(digest, "big") % PID_SPAN


def _next_pid(pid: int) -> int:
    return PID_BASE + (pid - PID_BASE + 1) % PID_SPAN


class PidTable:
    """Each identity's pid, kept for as long as the identity is listed."""

    def __init__(self) -> None:
        self._pids: dict[str, int] = {}

    def assign(
        self, identities: Iterable[str], previous: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """The pid of each of `identities`, which are all that hold a pid now.

        A newcomer takes its pid in `previous` (what the document showed
        before a restart) when free, else its hash's, else the next free one.
        """
        wanted = set(identities)
        kept = {key: pid for key, pid in self._pids.items() if key in wanted}
        taken = set(kept.values())
        newcomers = sorted(wanted - kept.keys())
        for key in newcomers:
            pid = (previous or {}).get(key)
            if pid is not None and pid not in taken:
                taken.add(pid)
                kept[key] = pid
        for key in newcomers:
            if key in kept:
                continue
            pid = hashed_pid(key)
            while pid in taken:
                pid = _next_pid(pid)
            taken.add(pid)
            kept[key] = pid
        self._pids = kept
        return kept


def clean(text: str) -> str:
    return _UNSAFE.sub("\ufffd", text)


def cut(text: str, limit: int = NAME_MAX_BYTES) -> str:
    """`text` cut to `limit` bytes of UTF-8 without splitting a character."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def process_name(claim: Claim) -> str:
    """`<namespace>/<pod>/<container>[/<claim>]`, cleaned and cut to NAME_MAX_BYTES."""
    name = f"{claim.namespace}/{claim.pod}/{claim.container}"
    if claim.source is ClaimSource.DRA:
        name += f"/{claim.claim_name}"
    return cut(clean(name))


def share_mib(used_bytes: int, asked: int, asked_in_all: int) -> int:
    """A claim's part of `used_bytes`, in proportion to what it asked for, in whole MiB
    (rounded down): exactly its ask when the device has room for every claim's."""
    return asked * used_bytes // asked_in_all // MIB if asked_in_all else 0


@dataclass(frozen=True)
class ProcessLists:
    """Every device's list, and how many claims were folded into a `more` entry."""

    lists: dict[int, list[ProcessEntry]]
    folded: int


def _keys(rec: Reconciliation) -> list[tuple[str, Claim, tuple[int, ...]]]:
    """(key, claim, devices) of every listed claim on a device with a reading.

    A claim listed twice (no kubelet does) gets a key per listing, so each
    is an entry with a pid of its own.
    """
    seen: dict[str, int] = {}
    out = []
    for claim, where in rec.placed:
        on = tuple(i for i in where if i in rec.readings)
        if not on:
            continue
        key = identity(claim)
        repeat = seen[key] = seen.get(key, 0) + 1
        out.append((key if repeat == 1 else f"{key}\0{repeat}", claim, on))
    return sorted(out, key=lambda held: held[0])


def process_lists(
    rec: Reconciliation,
    pids: PidTable,
    previous: Mapping[tuple[int, str], int] | None = None,
    band_of: Callable[[Claim], Band] | None = None,
) -> ProcessLists:
    """The process list of every device that has a reading and claims, keyed by index.

    Entries are in order of claim identity, so a List in another order
    changes nothing. A device without claims is absent: the profile's own
    list is what it shows. `previous`: the pid of each (device, name) the
    document showed before a restart. `band_of`: each claim's busy band, when
    the entries carry utilization.
    """
    on_device: dict[int, list[tuple[str, Claim]]] = {}
    for key, claim, where in _keys(rec):
        for index in where:
            on_device.setdefault(index, []).append((key, claim))
    # index -> (key, name, the claims it stands for) of each entry
    shown: dict[int, list[tuple[str, str, list[Claim]]]] = {}
    folded = 0
    for index, claims in on_device.items():
        listed = claims
        if len(claims) > MAX_PROCESSES_PER_DEVICE:
            listed = claims[: MAX_PROCESSES_PER_DEVICE - 1]
        names = _distinct([process_name(claim) for _, claim in listed])
        shown[index] = [(key, name, [c]) for (key, c), name in zip(listed, names, strict=True)]
        if rest := [claim for _, claim in claims[len(listed) :]]:
            # A key no claim's identity can be: those have at least five fields.
            shown[index].append((f"\0more\0{index}", f"+{len(rest)} more claims", rest))
            folded += len(rest)
    earlier = {
        key: previous[(index, name)]
        for index, entries in shown.items()
        for key, name, _ in entries
        if previous and (index, name) in previous
    }
    keys = {key for claims in on_device.values() for key, _ in claims}
    pid_of = pids.assign(
        keys | {key for entries in shown.values() for key, _, _ in entries}, earlier
    )
    lists: dict[int, list[ProcessEntry]] = {}
    for index, entries in sorted(shown.items()):
        asked = rec.asked[index]
        in_all = sum(asked[claim] for _, claim in on_device[index])
        used = rec.readings[index].used_bytes
        utils = (
            iter(process_utilization([band_of(c) for _, c in on_device[index]]))
            if band_of is not None
            else None
        )
        lists[index] = []
        for key, name, claims in entries:
            mib = sum(share_mib(used, asked[claim], in_all) for claim in claims)
            entry = _entry(pid_of[key], name, mib)
            if utils is not None:
                taken = [next(utils) for _ in claims]
                entry["sm_util"] = sum(sm for sm, _ in taken)
                entry["mem_util"] = sum(mem for _, mem in taken)
            lists[index].append(entry)
    return ProcessLists(lists, folded)


def _entry(pid: int, name: str, mib: int) -> ProcessEntry:
    return {"pid": pid, "type": COMPUTE, "name": name, "used_memory_mib": mib}


def _distinct(names: list[str]) -> list[str]:
    """`names`, each repeat numbered `#2`, `#3`, ... (cut so the number stays)."""
    count: dict[str, int] = {}
    out = []
    for name in names:
        n = count[name] = count.get(name, 0) + 1
        if n > 1:
            suffix = f"#{n}"
            name = cut(name, NAME_MAX_BYTES - len(suffix)) + suffix
        out.append(name)
    return out
