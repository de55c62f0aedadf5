"""What the pod watch keeps of each pod: bounded, parsed once per value, problems once."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from allocwatch.declaredload import (
    GPU_MEMORY,
    GPU_UTILIZATION,
    MAX_VALUE_LENGTH,
    RUNAI_UTILIZATION,
    DeclaredLoad,
)
from allocwatch.podloads import PodLoads, fingerprint

A = ("ns", "a")
B = ("ns", "b")
GI = 2**30


def test_a_pod_without_our_annotations_is_not_kept() -> None:
    loads = PodLoads()
    assert loads.set(A, None) == []
    assert loads.set(A, {}) == []
    assert loads.set(A, {"example.com/x": "20Gi"}) == []
    assert len(loads) == 0
    assert loads.snapshot() == {}


def test_a_declared_load_is_in_the_snapshot_until_the_pod_goes() -> None:
    loads = PodLoads()
    assert loads.set(A, {GPU_MEMORY: "20Gi", "example.com/x": "y"}) == []
    assert loads.snapshot() == {A: DeclaredLoad(memory_bytes=20 * GI)}
    assert loads.set(A, {GPU_MEMORY: "20Gi", GPU_UTILIZATION: "40"}) == []
    assert loads.snapshot() == {A: DeclaredLoad(memory_bytes=20 * GI, utilization=(40, 40))}
    assert loads.set(A, {"example.com/x": "y"}) == [], "annotations removed: the defaults again"
    assert loads.snapshot() == {}
    loads.set(A, {RUNAI_UTILIZATION: "20-35"})
    assert loads.set(A, None) == []
    assert loads.snapshot() == {}
    assert len(loads) == 0


def test_the_snapshot_is_the_same_object_until_a_load_changes() -> None:
    loads = PodLoads()
    first = loads.snapshot()
    loads.set(B, {"example.com/x": "y"})
    assert loads.snapshot() is first
    loads.set(A, {GPU_MEMORY: "1Gi"})
    second = loads.snapshot()
    assert second is not first
    loads.set(A, {GPU_MEMORY: "1Gi", "example.com/x": "z"})
    loads.set(B, {"example.com/x": "w"})
    assert loads.snapshot() is second
    # a changed value that declares the same load changes nothing either
    loads.set(A, {GPU_MEMORY: "1024Mi"})
    assert loads.snapshot() is second
    with pytest.raises(TypeError):
        second[B] = DeclaredLoad()  # type: ignore[index]


def test_a_problem_is_returned_once_per_pod_and_value() -> None:
    loads = PodLoads()
    [problem] = loads.set(A, {GPU_MEMORY: "lots"}) or []
    assert (problem.annotation, problem.value) == (GPU_MEMORY, "lots")
    assert loads.set(A, {GPU_MEMORY: "lots", "example.com/x": "y"}) == []
    assert loads.snapshot() == {}, "a pod with only bad values gets the defaults"
    [again] = loads.set(A, {GPU_MEMORY: "-5Gi"}) or []
    assert again.value == "-5Gi"
    # another pod with the same bad value is another line
    assert [p.value for p in loads.set(B, {GPU_MEMORY: "-5Gi"}) or []] == ["-5Gi"]
    # a value made good, then bad again as before, is reported again
    assert loads.set(A, {GPU_MEMORY: "1Gi"}) == []
    assert [p.value for p in loads.set(A, {GPU_MEMORY: "-5Gi"}) or []] == ["-5Gi"]
    # and a pod that left and came back is a new pod
    loads.set(A, None)
    assert [p.value for p in loads.set(A, {GPU_MEMORY: "-5Gi"}) or []] == ["-5Gi"]


def test_a_change_to_one_value_reports_only_that_one() -> None:
    loads = PodLoads()
    problems = loads.set(A, {GPU_MEMORY: "lots", GPU_UTILIZATION: "90-60"}) or []
    assert [p.annotation for p in problems] == [GPU_MEMORY, GPU_UTILIZATION]
    problems = loads.set(A, {GPU_MEMORY: "lots", GPU_UTILIZATION: "200"}) or []
    assert [(p.annotation, p.value) for p in problems] == [(GPU_UTILIZATION, "200")]
    problems = loads.set(A, {GPU_MEMORY: "0.5", GPU_UTILIZATION: "200"}) or []
    assert problems == []
    assert loads.snapshot() == {A: DeclaredLoad(memory_fraction=0.5)}


def test_fake_gpu_operators_value_is_kept_and_ours_wins() -> None:
    loads = PodLoads()
    loads.set(A, {RUNAI_UTILIZATION: "20-35"})
    assert loads.snapshot()[A] == DeclaredLoad(utilization=(20, 35))
    loads.set(A, {RUNAI_UTILIZATION: "20-35", GPU_UTILIZATION: "90"})
    assert loads.snapshot()[A] == DeclaredLoad(utilization=(90, 90))


def test_an_over_long_value_is_reported_not_kept() -> None:
    loads = PodLoads()
    huge = "9" * 1_000_000
    [problem] = loads.set(A, {GPU_MEMORY: huge}) or []
    assert "1000000 characters" in problem.reason
    assert len(problem.value) < 50
    assert loads.set(A, {GPU_MEMORY: "9" * 1_000_000}) == [], "the same value is not reported again"
    [changed] = loads.set(A, {GPU_MEMORY: "8" * 1_000_000}) or []
    assert changed.value.startswith("8")
    assert fingerprint(huge) != fingerprint("8" * 1_000_000)
    assert len(fingerprint(huge) or "") <= MAX_VALUE_LENGTH
    assert fingerprint("20Gi") == "20Gi"


def test_memory_kept_is_bounded_whatever_the_pods_write() -> None:
    """1000 pods with three 100 kB values each leave well under 1 MB behind."""
    loads = PodLoads()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000):
            value = str(i) * 50_000
            annotations = {GPU_MEMORY: value, GPU_UTILIZATION: value, RUNAI_UTILIZATION: value}
            loads.set(("ns", f"p{i}"), annotations)
            del value, annotations
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(loads) == 1000
    assert kept < 1_000_000, f"{kept} bytes kept for 1000 pods"


def test_at_most_max_pods_are_kept() -> None:
    loads = PodLoads(max_pods=2)
    assert loads.set(("ns", "p0"), {GPU_MEMORY: "1Gi"}) == []
    assert loads.set(("ns", "p1"), {GPU_MEMORY: "2Gi"}) == []
    assert loads.set(("ns", "p2"), {GPU_MEMORY: "3Gi"}) is None, "the third is not kept"
    assert set(loads.snapshot()) == {("ns", "p0"), ("ns", "p1")}
    # the pods kept still change, and one leaving makes room
    assert loads.set(("ns", "p1"), {GPU_MEMORY: "4Gi"}) == []
    assert loads.snapshot()[("ns", "p1")] == DeclaredLoad(memory_bytes=4 * GI)
    assert loads.set(("ns", "p2"), {"example.com/x": "y"}) == [], "nothing to keep: no refusal"
    loads.set(("ns", "p0"), None)
    assert loads.set(("ns", "p2"), {GPU_MEMORY: "3Gi"}) == []
    assert set(loads.snapshot()) == {("ns", "p1"), ("ns", "p2")}


def test_replace_is_a_relist() -> None:
    loads = PodLoads(max_pods=2)
    loads.set(A, {GPU_MEMORY: "lots"})
    loads.set(B, {GPU_MEMORY: "1Gi"})
    c, d = ("ns", "c"), ("ns", "d")
    results = loads.replace(
        [(A, {GPU_MEMORY: "lots"}), (c, {GPU_MEMORY: "2Gi"}), (d, {GPU_UTILIZATION: "x"})]
    )
    # B is gone before the others are counted: A and c fit, d does not
    assert results[A] == [], "an unchanged bad value is not reported again after a relist"
    assert results[c] == []
    assert results[d] is None
    assert loads.snapshot() == {c: DeclaredLoad(memory_bytes=2 * GI)}
    results = loads.replace([])
    assert results == {}
    assert loads.snapshot() == {} and len(loads) == 0


def test_replace_publishes_once() -> None:
    loads = PodLoads()
    before = loads.snapshot()
    loads.replace([(A, {"example.com/x": "y"}), (B, None)])
    assert loads.snapshot() is before
    loads.replace([(A, {GPU_MEMORY: "1Gi"}), (B, {GPU_MEMORY: "2Gi"})])
    assert loads.snapshot() == {
        A: DeclaredLoad(memory_bytes=GI),
        B: DeclaredLoad(memory_bytes=2 * GI),
    }
