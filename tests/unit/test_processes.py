"""Claims as NVML processes: the pid, the name, the MiB split."""

from __future__ import annotations

import hashlib
import random

import pytest

from allocwatch import processes
from allocwatch.claims import Claim
from allocwatch.processes import (
    NAME_MAX_BYTES,
    PID_BASE,
    PID_SPAN,
    assign_pids,
    hashed_pid,
    process_lists,
    process_name,
)
from allocwatch.profile import Device
from allocwatch.reconcile import reconcile
from tests.conftest import A100_APERTURE, A100_HALF, A100_UUIDS

MIB = 2**20


def claim(pod: str, uuid: str, namespace: str = "ml", container: str = "main") -> Claim:
    return Claim(namespace, pod, container, "nvidia.com/gpu", uuid)


def lists(a100: list[Device], claims: list[Claim], fraction: float = 0.5) -> dict:
    return process_lists(reconcile(a100, claims, fraction))


# ---- the pid ----------------------------------------------------------------


def test_the_pid_is_the_documented_hash_of_the_claim() -> None:
    c = claim("train", A100_UUIDS[0])
    text = "\0".join(("ml", "train", "main", "nvidia.com/gpu", A100_UUIDS[0]))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    assert hashed_pid(c) == 10_000_000 + int.from_bytes(digest, "big") % 90_000_000


def test_pids_are_eight_digit_numbers_no_linux_process_can_have() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        c = claim(f"p{rng.random()}", A100_UUIDS[rng.randrange(8)], namespace=f"n{rng.random()}")
        pid = hashed_pid(c)
        assert len(str(pid)) == 8  # the most nvidia-smi's process table prints whole
        assert pid > 2**22  # PID_MAX_LIMIT: the kernel never hands out a larger pid


def test_the_same_claim_keeps_its_pid_whatever_else_is_listed() -> None:
    mine = claim("train", A100_UUIDS[0])
    others = [claim(f"other-{i}", A100_UUIDS[i % 8]) for i in range(20)]
    alone = assign_pids([mine])[0]
    for k in range(len(others)):
        mixed = [*others[:k], mine, *others[k:]]
        assert assign_pids(mixed)[k] == alone


def test_distinct_claims_get_distinct_pids() -> None:
    claims = [claim(f"pod-{i}", A100_UUIDS[i % 8]) for i in range(3000)]
    assert len(set(assign_pids(claims))) == len(claims)


def test_a_hash_collision_moves_the_later_identity_to_the_next_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes, "hashed_pid", lambda c: PID_BASE + PID_SPAN - 1)
    a, b, c = claim("a", A100_UUIDS[0]), claim("b", A100_UUIDS[0]), claim("c", A100_UUIDS[1])
    # In identity order: a keeps the hash, b takes the next (wrapping to the base), then c.
    want = {a: PID_BASE + PID_SPAN - 1, b: PID_BASE, c: PID_BASE + 1}
    for order in ([a, b, c], [c, b, a], [b, c, a]):
        assert dict(zip(order, assign_pids(order), strict=True)) == want


def test_identical_claims_never_share_a_pid() -> None:
    twice = [claim("a", A100_UUIDS[0]), claim("a", A100_UUIDS[0])]
    first, second = assign_pids(twice)
    assert first != second


def test_a_collision_never_puts_one_pid_twice_on_a_gpu(
    a100: list[Device], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "hashed_pid", lambda c: PID_BASE + 5)
    claims = [claim(p, A100_UUIDS[0]) for p in "abc"] + [claim("d", A100_UUIDS[1])]
    got = lists(a100, claims)
    pids = [e["pid"] for entries in got.values() for e in entries]
    assert sorted(pids) == [PID_BASE + 5, PID_BASE + 6, PID_BASE + 7, PID_BASE + 8]


# ---- the name ---------------------------------------------------------------


def test_the_name_is_namespace_pod_container() -> None:
    assert process_name(claim("trainer", A100_UUIDS[0], "ml", "app")) == "ml/trainer/app"


def test_a_long_name_is_cut_to_what_a_255_byte_nvml_buffer_holds() -> None:
    # Kubernetes allows 63 + 253 + 63 characters, which with the slashes exceed it.
    c = Claim("n" * 63, "p" * 253, "c" * 63, "nvidia.com/gpu", A100_UUIDS[0])
    name = process_name(c)
    assert NAME_MAX_BYTES == 255
    assert name == ("n" * 63 + "/" + "p" * 253 + "/" + "c" * 63)[:255]
    assert len(name.encode()) == 255


def test_a_cut_never_splits_a_character() -> None:
    c = Claim("é" * 200, "p", "c", "nvidia.com/gpu", A100_UUIDS[0])
    name = process_name(c)
    assert name == "é" * 127  # 254 bytes: the 128th would need bytes 255 and 256
    assert len(name.encode()) <= 255


# ---- the MiB split ----------------------------------------------------------


def test_one_claim_holds_the_devices_used_bytes_in_whole_mib(a100: list[Device]) -> None:
    c = claim("train", A100_UUIDS[3], container="app")
    assert lists(a100, [c]) == {
        3: [
            {
                "pid": hashed_pid(c),
                "type": "C",
                "name": "ml/train/app",
                "used_memory_mib": A100_HALF // MIB,  # 20188.5 MiB, rounded down
            }
        ]
    }


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_clamped_gpus_claims_split_the_aperture(a100: list[Device], n: int) -> None:
    claims = [claim(f"p{i}", A100_UUIDS[0]) for i in range(n)]
    entries = lists(a100, claims)[0]
    assert len(entries) == n
    assert {e["used_memory_mib"] for e in entries} == {A100_APERTURE // n // MIB}
    assert sum(e["used_memory_mib"] for e in entries) * MIB <= A100_APERTURE


def test_the_sum_never_exceeds_used_bytes() -> None:
    rng = random.Random(3)
    for _ in range(300):
        total = rng.randrange(2**20, 2**40)
        device = Device(0, "GPU-x", total, rng.randrange(0, total // 4))
        fraction = rng.uniform(0.01, 1)
        claims = [claim(f"p{i}", "GPU-x") for i in range(rng.randrange(1, 9))]
        rec = reconcile([device], claims, fraction)
        entries = process_lists(rec)[0]
        assert sum(e["used_memory_mib"] for e in entries) * MIB <= rec.readings[0].used_bytes


def test_time_sliced_replicas_are_two_processes_on_their_gpu(a100: list[Device]) -> None:
    claims = [claim("a", A100_UUIDS[5] + "::0"), claim("b", A100_UUIDS[5] + "::1")]
    got = lists(a100, claims)
    assert list(got) == [5]
    assert sorted(e["name"] for e in got[5]) == ["ml/a/main", "ml/b/main"]
    assert len({e["pid"] for e in got[5]}) == 2


def test_idle_and_unknown_devices_get_no_list(a100: list[Device]) -> None:
    assert lists(a100, []) == {}
    assert lists(a100, [claim("x", "GPU-does-not-exist")]) == {}


def test_a_device_without_a_reading_gets_no_list() -> None:
    memoryless = Device(0, "GPU-x", 0, 0, has_memory=False)
    claims = [claim("a", "GPU-x")]
    assert process_lists(reconcile([memoryless], claims, 0.5)) == {}


def test_list_order_does_not_change_the_lists(a100: list[Device]) -> None:
    claims = [claim(f"p{i}", A100_UUIDS[i % 2]) for i in range(6)]
    assert lists(a100, claims) == lists(a100, list(reversed(claims)))
