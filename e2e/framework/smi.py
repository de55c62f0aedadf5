"""GPU readings as a user sees them: `nvidia-smi` run in a pod, against the mock driver.

The expected rows come from the profile by the suite's own arithmetic
(expected.py), never from allocwatch's, so a wrong reading cannot agree with
itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .expected import MIB, Expectation
from .kubectl import Kubectl

QUERY = ["uuid", "memory.used", "memory.free", "memory.total"]


@dataclass(frozen=True)
class SmiRow:
    uuid: str
    used_mib: int
    free_mib: int
    total_mib: int


def parse_rows(csv: str) -> list[SmiRow]:
    """`--format=csv,noheader,nounits` output of QUERY, one row a GPU."""
    rows = []
    for line in csv.splitlines():
        if not line.strip():
            continue
        uuid, used, free, total = (field.strip() for field in line.split(","))
        rows.append(SmiRow(uuid, int(used), int(free), int(total)))
    return rows


def expected_rows(expectation: Expectation, claims: Mapping[str, int]) -> list[SmiRow]:
    """The rows of every GPU with memory, in index order, for `claims` (uuid -> count)."""
    counts = {expectation.index_of(uuid): n for uuid, n in claims.items() if n}
    readings = expectation.readings(counts)
    return [
        SmiRow(
            d.uuid,
            readings[str(d.index)]["used_bytes"] // MIB,
            readings[str(d.index)]["free_bytes"] // MIB,
            d.total_bytes // MIB,
        )
        for d in sorted(expectation.devices, key=lambda d: d.index)
        if d.has_memory
    ]


class NvidiaSmi:
    """nvidia-smi in pods that nvml-mock's NRI plugin gave the mock driver."""

    def __init__(self, kubectl: Kubectl) -> None:
        self.kubectl = kubectl

    def rows(self, namespace: str, pod: str) -> list[SmiRow]:
        out = self.kubectl.exec(
            namespace,
            pod,
            ["nvidia-smi", f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"],
        )
        return parse_rows(out)

    def query(self, namespace: str, pod: str, fields: Sequence[str]) -> list[list[str]]:
        """Any `--query-gpu` fields, as strings, one list a GPU."""
        out = self.kubectl.exec(
            namespace,
            pod,
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
        )
        return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]

    def apps(self, namespace: str, pod: str) -> list[list[str]]:
        """The Processes table uncut: [GPU uuid, process name, used MiB] a process."""
        out = self.kubectl.exec(
            namespace,
            pod,
            [
                "nvidia-smi",
                "--query-compute-apps=gpu_uuid,process_name,used_memory",
                "--format=csv,noheader,nounits",
            ],
        )
        return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]

    def table(self, namespace: str, pod: str) -> str:
        """The full `nvidia-smi` table, as a user reads it."""
        return self.kubectl.exec(namespace, pod, ["nvidia-smi"])
