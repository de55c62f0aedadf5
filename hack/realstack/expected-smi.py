#!/usr/bin/env python3
"""The nvidia-smi rows allocwatch's readings must give, from the profile alone.

    expected-smi.py PROFILE FRACTION [UUID...]

prints `uuid, used, free, total` (MiB, as `--format=csv,noheader,nounits`
shows them) for every GPU with memory, in index order, one claim per UUID
given. The readings come from the e2e suite's oracle (e2e/framework/expected),
not from allocwatch's own reconcile, so a wrong reading cannot agree with
itself.
"""

from __future__ import annotations

import sys

from allocwatch.profilesource import load_devices
from e2e.framework.expected import Expectation

MIB = 1 << 20


def rows(profile: str, fraction: float, claimed: list[str]) -> list[str]:
    expectation = Expectation(load_devices(profile), fraction)
    readings = expectation.readings(expectation.claims_for(claimed))
    return [
        f"{device.uuid}, {readings[str(device.index)]['used_bytes'] // MIB}, "
        f"{readings[str(device.index)]['free_bytes'] // MIB}, {device.total_bytes // MIB}"
        for device in sorted(expectation.devices, key=lambda d: d.index)
        if device.has_memory
    ]


if __name__ == "__main__":
    profile, fraction, *claimed = sys.argv[1:]
    print("\n".join(rows(profile, float(fraction), claimed)))
