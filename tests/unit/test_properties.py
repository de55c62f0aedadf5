"""Properties of whole polls over generated claim sets (Hypothesis).

Any claim set a kubelet could list, of any size, with names over all of
Unicode and DRA device names of any length and shape: every poll succeeds,
every document written is one allocwatch reads back within its own bounds,
the readings are right by the suite's own arithmetic, and a claim keeps its
pid across polls and across a restart.

`make test` runs a bounded number of examples (profile `ci`); `make fuzz`
runs many more, with larger claim sets (profile `fuzz`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from itertools import cycle
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocwatch.claims import Claim, ClaimSource
from allocwatch.document import count_nodes, parse_document
from allocwatch.goyaml import MAX_NODES
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.processes import MAX_PROCESSES_PER_DEVICE
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.sharedfile import MAX_DOCUMENT_BYTES
from allocwatch.watch import Watcher
from devtools.documents import memory, processes
from tests.conftest import A100, A100_APERTURE, A100_UUIDS
from tests.support.stublister import StubLister

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "fuzz", max_examples=400, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
FUZZ = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"
MOST_CLAIMS = 10_000 if FUZZ else 1_000
PER_CLAIM = int(float(A100_APERTURE) * 0.5)
UNSAFE = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0xFFFE, 0xFFFF]}

names = st.text(st.characters(), max_size=40)
device_plugin_ids = st.one_of(
    st.sampled_from(A100_UUIDS),
    st.builds(lambda u, n: f"{u}::{n}", st.sampled_from(A100_UUIDS), st.integers(0, 99)),
    names,  # ids matching no GPU
)
dra_names = st.one_of(
    st.builds(lambda n: f"gpu-{n}", st.integers(0, 10**30)),
    st.builds(lambda n, m: f"gpu-{n}-mig-{m}", st.integers(0, 9), names),
    st.builds(lambda u: u.lower(), st.sampled_from(A100_UUIDS)),
    st.text(st.characters(), max_size=5000),
    st.builds(lambda n: "gpu-" + "9" * n, st.integers(1, 6000)),
)


def claims(namespaces: list[str], pods: list[str]) -> st.SearchStrategy[Claim]:
    ns, pod = st.sampled_from(namespaces), st.sampled_from(pods)
    return st.one_of(
        st.builds(Claim, ns, pod, names, st.just("nvidia.com/gpu"), device_plugin_ids),
        st.builds(
            lambda n, p, c, d, claim, share: Claim(
                n, p, c, "gpu.nvidia.com", d, ClaimSource.DRA, n, claim, "node", share
            ),
            ns,
            pod,
            names,
            dra_names,
            names,
            st.one_of(st.none(), names),
        ),
    )


@st.composite
def claim_sets(draw: st.DrawFn, most: int = MOST_CLAIMS) -> list[Claim]:
    """A few drawn claims, and as many again as the drawn count, made from them.

    Hypothesis draws odd names and shapes well but large lists badly, so a
    large set repeats the drawn claims, each copy with a pod of its own.
    """
    namespaces = draw(st.lists(names, min_size=1, max_size=4))
    pods = draw(st.lists(names, min_size=1, max_size=50))
    drawn = draw(st.lists(claims(namespaces, pods), max_size=30))
    if not drawn:
        return []
    copies = draw(st.one_of(st.just(0), st.integers(0, most)))
    made = [replace(c, pod=f"{c.pod}-{n}") for n, c in zip(range(copies), cycle(drawn))]
    return drawn + made


@contextmanager
def driver_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="aw-prop-"))
    (root / "config").mkdir()
    shutil.copy(A100, root / "config" / "config.yaml")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def watcher(root: Path, lister: StubLister) -> Watcher:
    return Watcher(
        lister,
        ProfileSource(root / "config" / "config.yaml"),
        OverridesPublisher(root / "config" / "overrides.yaml", lock_timeout=5),
        fraction=0.5,
        interval=0.5,
        metrics=Metrics(),
    )


def device_of(claim: Claim) -> int | None:
    """The a100 device a claim lands on, by the contract's rules written out again."""
    if claim.source is ClaimSource.DRA:
        name = claim.device_id
        if len(name) > 253:  # longer than a DNS name: never a device
            return None
        for index, uuid in enumerate(A100_UUIDS):
            if name.lower() == uuid.lower():
                return index
        number = name.removeprefix("gpu-").partition("-mig-")[0]
        full = name in (f"gpu-{number}", f"gpu-{number}-mig-{name.partition('-mig-')[2]}")
        # the a100 profile gives no minor numbers: gpu-<index>
        return int(number) if full and number in "01234567" and len(number) == 1 else None
    uuid = claim.device_id.split("::", 1)[0]
    return A100_UUIDS.index(uuid) if uuid in A100_UUIDS else None


def check_document(root: Path, listed: list[Claim]) -> dict[tuple[str, str], int]:
    """Everything a written document must be; returns each entry's (device, name) -> pid."""
    text = (root / "config" / "overrides.yaml").read_text()
    assert len(text.encode()) <= MAX_DOCUMENT_BYTES
    doc = parse_document(text)  # allocwatch's own reader takes it
    assert count_nodes(doc) <= MAX_NODES
    counts = [0] * 8
    for claim in listed:
        index = device_of(claim)
        if index is not None:
            counts[index] += 1
    used = {str(i): min(PER_CLAIM * n, A100_APERTURE) for i, n in enumerate(counts)}
    assert {i: m["used_bytes"] for i, m in memory(doc).items()} == used
    pids: dict[tuple[str, str], int] = {}
    for index, entries in processes(doc).items():
        assert counts[int(index)] > 0
        assert len(entries) == min(counts[int(index)], MAX_PROCESSES_PER_DEVICE)
        assert sum(e["used_memory_mib"] for e in entries) * 2**20 <= used[index]
        for entry in entries:
            assert not UNSAFE & set(entry["name"]), entry["name"]
            assert len(entry["name"].encode()) <= 255
            assert (index, entry["name"]) not in pids
            pids[(index, entry["name"])] = entry["pid"]
    assert len(set(pids.values())) == len(pids)  # node-wide
    assert {i for i, n in enumerate(counts) if n} == {int(i) for i in processes(doc)}
    return pids


@given(claim_sets())
def test_every_poll_succeeds_and_writes_a_document_allocwatch_reads_back(
    listed: list[Claim],
) -> None:
    with driver_root() as root:
        assert watcher(root, StubLister(listed)).poll() == PollOutcome.OK
        check_document(root, listed)


@st.composite
def polls_of_one_pool(draw: st.DrawFn) -> list[list[Claim]]:
    """2-4 claim sets drawn from one pool whose claims all differ in name, so that an
    entry's device and name stand for one claim, and a claim can be followed."""
    pods = draw(st.lists(names, min_size=1, max_size=MOST_CLAIMS // 10, unique=True))
    pool = [Claim("ns", pod, "main", "nvidia.com/gpu", draw(device_plugin_ids)) for pod in pods]
    subsets = st.lists(st.sampled_from(pool), unique_by=lambda c: c.pod) if pool else st.just([])
    return draw(st.lists(subsets, min_size=2, max_size=4))


@given(polls_of_one_pool())
def test_a_claim_keeps_its_pid_across_polls_and_a_restart(sets: list[list[Claim]]) -> None:
    with driver_root() as root:
        lister = StubLister()
        first = watcher(root, lister)
        before: dict[tuple[str, str], int] = {}
        for listed in sets:
            lister.set_claims(listed)
            assert first.poll() == PollOutcome.OK
            now = check_document(root, listed)
            for entry, pid in now.items():
                if entry in before and not entry[1].startswith("+"):
                    assert pid == before[entry], entry
            before = now
        # Killed, not stopped: a new watcher finds the entries in the file.
        again = watcher(root, lister)
        assert again.poll() == PollOutcome.OK
        assert check_document(root, sets[-1]) == before
