"""Claims as NVML processes: the pid, the name, the MiB split."""

from __future__ import annotations

import hashlib
import random

import pytest

from allocwatch import processes
from allocwatch.claims import Claim, ClaimSource
from allocwatch.declaredload import DeclaredLoad
from allocwatch.processes import (
    NAME_MAX_BYTES,
    PID_BASE,
    PID_SPAN,
    PidTable,
    hashed_pid,
    identity,
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
    return process_lists(reconcile(a100, claims, fraction), PidTable()).lists


def pid(c: Claim) -> int:
    return hashed_pid(identity(c))


def fresh_pids(claims: list[Claim]) -> list[int]:
    """The pids a table that has seen none of them gives `claims`, in their order."""
    assigned = PidTable().assign(identity(c) for c in claims)
    return [assigned[identity(c)] for c in claims]


# ---- the pid ----------------------------------------------------------------


def test_the_pid_is_the_documented_hash_of_the_claim() -> None:
    c = claim("train", A100_UUIDS[0])
    text = "\0".join(("ml", "train", "main", "nvidia.com/gpu", A100_UUIDS[0]))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    assert pid(c) == 10_000_000 + int.from_bytes(digest, "big") % 90_000_000


def test_pids_are_eight_digit_numbers_no_linux_process_can_have() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        c = claim(f"p{rng.random()}", A100_UUIDS[rng.randrange(8)], namespace=f"n{rng.random()}")
        assert len(str(pid(c))) == 8  # the most nvidia-smi's process table prints whole
        assert pid(c) > 2**22  # PID_MAX_LIMIT: the kernel never hands out a larger pid


def test_the_same_claim_keeps_its_pid_whatever_else_is_listed() -> None:
    mine = claim("train", A100_UUIDS[0])
    others = [claim(f"other-{i}", A100_UUIDS[i % 8]) for i in range(20)]
    alone = fresh_pids([mine])[0]
    for k in range(len(others)):
        mixed = [*others[:k], mine, *others[k:]]
        assert fresh_pids(mixed)[k] == alone


def test_distinct_claims_get_distinct_pids() -> None:
    claims = [claim(f"pod-{i}", A100_UUIDS[i % 8]) for i in range(3000)]
    assert len(set(fresh_pids(claims))) == len(claims)


def test_a_hash_collision_among_newcomers_moves_the_later_identity_to_the_next_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes, "hashed_pid", lambda key: PID_BASE + PID_SPAN - 1)
    a, b, c = claim("a", A100_UUIDS[0]), claim("b", A100_UUIDS[0]), claim("c", A100_UUIDS[1])
    # In identity order: a keeps the hash, b takes the next (wrapping to the base), then c.
    want = {a: PID_BASE + PID_SPAN - 1, b: PID_BASE, c: PID_BASE + 1}
    for order in ([a, b, c], [c, b, a], [b, c, a]):
        assert dict(zip(order, fresh_pids(order), strict=True)) == want


def test_a_running_claim_keeps_its_pid_and_only_the_newcomer_moves() -> None:
    # A real collision, found by a birthday search: both hash to 55270703.
    running, newcomer = claim("p5457", A100_UUIDS[0]), claim("p11236", A100_UUIDS[0])
    assert pid(running) == pid(newcomer) == 55270703
    assert identity(newcomer) < identity(running)  # among newcomers, it would win
    table = PidTable()
    assert table.assign([identity(running)]) == {identity(running): 55270703}
    both = table.assign([identity(newcomer), identity(running)])
    assert both == {identity(running): 55270703, identity(newcomer): 55270704}
    # and when the newcomer leaves and comes back, it moves again, not the other
    table.assign([identity(running)])
    assert table.assign([identity(running), identity(newcomer)])[identity(running)] == 55270703


def test_a_claim_keeps_its_pid_across_polls_while_others_come_and_go() -> None:
    rng = random.Random(11)
    table = PidTable()
    live: dict[str, int] = {}
    pool = [identity(claim(f"p{i}", A100_UUIDS[i % 8])) for i in range(400)]
    for _ in range(200):
        listed = set(rng.sample(pool, rng.randrange(1, 120)))
        got = table.assign(listed)
        assert set(got) == listed and len(set(got.values())) == len(got)
        for key, value in live.items():
            if key in listed:
                assert got[key] == value
        live = got


def test_identical_claims_never_share_a_pid(a100: list[Device]) -> None:
    twice = [claim("a", A100_UUIDS[0]), claim("a", A100_UUIDS[0])]
    first, second = lists(a100, twice)[0]
    assert first["pid"] != second["pid"]


def test_a_collision_never_puts_one_pid_twice_on_a_gpu(
    a100: list[Device], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(processes, "hashed_pid", lambda key: PID_BASE + 5)
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
                "pid": pid(c),
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
        entries = process_lists(rec, PidTable()).lists[0]
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
    assert process_lists(reconcile([memoryless], claims, 0.5), PidTable()).lists == {}


def test_list_order_does_not_change_the_lists(a100: list[Device]) -> None:
    claims = [claim(f"p{i}", A100_UUIDS[i % 2]) for i in range(6)]
    assert lists(a100, claims) == lists(a100, list(reversed(claims)))


# ---- what a pod or a kubelet may put in a name --------------------------------


@pytest.mark.parametrize(
    "raw", ["p\x00x", "p\x7fx", "p\x9bx", "p\x85x", "p\ufffex", "p\uffffx", "p\nx", "p\tx"]
)
def test_control_characters_become_the_replacement_character(raw: str) -> None:
    name = process_name(claim(raw, A100_UUIDS[0]))
    assert name == "ml/p\ufffdx/main"


def test_other_characters_are_kept() -> None:
    assert process_name(claim("p\u2028\ufeff\U0001f600\ufffdé", A100_UUIDS[0])) == (
        "ml/p\u2028\ufeff\U0001f600\ufffdé/main"
    )


def test_a_dra_claim_is_named_with_its_claim() -> None:
    c = Claim("ml", "train", "main", "gpu.nvidia.com", "gpu-0", ClaimSource.DRA, "ml", "gpus")
    assert process_name(c) == "ml/train/main/gpus"


def test_two_dra_claims_of_one_container_on_one_gpu_are_told_apart(a100: list[Device]) -> None:
    def dra(claim_name: str) -> Claim:
        return Claim(
            "ml", "t", "main", "gpu.nvidia.com", "gpu-2", ClaimSource.DRA, "ml", claim_name
        )

    got = lists(a100, [dra("a"), dra("b")])
    assert [e["name"] for e in got[2]] == ["ml/t/main/a", "ml/t/main/b"]


def test_replicas_one_container_holds_on_one_gpu_are_numbered(a100: list[Device]) -> None:
    replicas = [claim("t", f"{A100_UUIDS[1]}::{n}") for n in range(3)]
    got = lists(a100, replicas)
    assert [e["name"] for e in got[1]] == ["ml/t/main", "ml/t/main#2", "ml/t/main#3"]
    assert len({e["pid"] for e in got[1]}) == 3


def test_a_numbered_name_keeps_its_number_when_cut() -> None:
    long = "p" * 300
    names = processes._distinct([long[:255], long[:255]])
    assert names[1].endswith("#2") and len(names[1].encode()) == 255


# ---- a GPU with more claims than nvidia-smi shows ------------------------------


def test_past_the_limit_the_last_claims_fold_into_one_entry_holding_their_memory() -> None:
    device = Device(0, "GPU-x", 80 << 30, 0)
    n = processes.MAX_PROCESSES_PER_DEVICE + 9
    claims = [claim(f"p{i:03d}", f"GPU-x::{i}") for i in range(n)]
    rec = reconcile([device], claims, 0.001)
    got = process_lists(rec, PidTable())
    entries = got.lists[0]
    assert len(entries) == processes.MAX_PROCESSES_PER_DEVICE
    assert [e["name"] for e in entries[:3]] == ["ml/p000/main", "ml/p001/main", "ml/p002/main"]
    assert entries[-1]["name"] == "+10 more claims"
    share = rec.readings[0].used_bytes // n // MIB
    assert entries[-1]["used_memory_mib"] == 10 * share
    assert sum(e["used_memory_mib"] for e in entries) == n * share
    assert got.folded == 10
    assert len({e["pid"] for e in entries}) == len(entries)


def test_the_folded_entry_keeps_its_pid_as_claims_come_and_go() -> None:
    device = Device(0, "GPU-x", 80 << 30, 0)
    table = PidTable()

    def more_pid(n: int) -> int:
        claims = [claim(f"p{i:03d}", f"GPU-x::{i}") for i in range(n)]
        return process_lists(reconcile([device], claims, 0.001), table).lists[0][-1]["pid"]

    assert more_pid(40) == more_pid(50) == more_pid(33)


def test_a_restart_takes_the_documents_pids_back() -> None:
    device = Device(0, "GPU-x", 80 << 30, 0)
    claims = [claim("a", "GPU-x"), claim("b", "GPU-x")]
    rec = reconcile([device], claims, 0.1)
    before = {(0, "ml/a/main"): 12345678, (0, "ml/b/main"): 23456789}
    got = process_lists(rec, PidTable(), before).lists[0]
    assert [(e["name"], e["pid"]) for e in got] == [
        ("ml/a/main", 12345678),
        ("ml/b/main", 23456789),
    ]
    # a pid the document gave two names goes to one of them; the other hashes
    clash = {(0, "ml/a/main"): 12345678, (0, "ml/b/main"): 12345678}
    got = process_lists(rec, PidTable(), clash).lists[0]
    assert got[0]["pid"] == 12345678 and got[1]["pid"] == pid(claims[1])


def test_each_process_holds_what_its_pod_declared_and_they_sum_to_at_most_used() -> None:
    device = Device(0, "GPU-x", 80 * 2**30, 0)
    claims = [claim("infer", "GPU-x::0"), claim("train", "GPU-x::1"), claim("plain", "GPU-x::2")]
    loads = {
        ("ml", "infer"): DeclaredLoad(memory_bytes=30 * 2**30),
        ("ml", "train"): DeclaredLoad(memory_bytes=75 * 2**30),
    }
    rec = reconcile([device], claims, 0.5, loads)
    assert rec.readings[0].used_bytes == 80 * 2**30  # 30 + 75 + 40 GiB asked, clamped
    entries = {e["name"]: e["used_memory_mib"] for e in process_lists(rec, PidTable()).lists[0]}
    asked = 30 + 75 + 40
    assert entries == {
        "ml/infer/main": 30 * 80 * 1024 // asked,
        "ml/train/main": 75 * 80 * 1024 // asked,
        "ml/plain/main": 40 * 80 * 1024 // asked,
    }
    assert sum(entries.values()) * MIB <= rec.readings[0].used_bytes
