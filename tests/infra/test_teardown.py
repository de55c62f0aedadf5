"""cluster-down's host clean-up (hack/cluster/hoststate.sh) on real iptables.

Each test runs in a network namespace of its own (`unshare -n`), so the rules
the kubelet and the CNI plugins make are made for real, by iptables and
ip6tables, without touching the machine's. The cgroup tree is a directory
tree given as ALLOCWATCH_CGROUP_ROOT, and the host paths are under tmp_path
(ALLOCWATCH_HOST_PATHS). Root, iptables and nft are needed:
without them these tests skip, except under CI (env CI set), where they must
run and so fail instead (.ci/run installs them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

CLUSTER = REPO_ROOT / "hack" / "cluster"

# What a kubelet and the CNI bridge/portmap/firewall plugins leave behind.
KUBELET_AND_CNI = """
iptables -N KUBE-FIREWALL
iptables -A INPUT -j KUBE-FIREWALL
iptables -A OUTPUT -j KUBE-FIREWALL
iptables -A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 \
  -m comment --comment "block incoming localnet connections" \
  -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
for t in filter nat mangle; do
  iptables -t $t -N KUBE-KUBELET-CANARY
  ip6tables -t $t -N KUBE-KUBELET-CANARY
done
iptables -t mangle -N KUBE-IPTABLES-HINT
ip6tables -t mangle -N KUBE-IPTABLES-HINT
iptables -t nat -N CNI-0a1b2c
iptables -t nat -A CNI-0a1b2c -d 10.244.0.0/24 -j ACCEPT
iptables -t nat -A POSTROUTING -s 10.244.0.5 \
  -m comment --comment 'name: "k8s-pod-network" id: "abc"' -j CNI-0a1b2c
iptables -N CNI-FORWARD
iptables -I FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
mkdir -p "$ALLOCWATCH_CGROUP_ROOT"/cpu/kubepods/besteffort/pod1 \
  "$ALLOCWATCH_CGROUP_ROOT"/memory/docker/0123
"""

# The machine's own Docker, there before cluster-up, with a running container
# (a file in a plain directory stands for the processes that keep rmdir off).
MACHINE_DOCKER = """
iptables -N DOCKER
iptables -A DOCKER -j RETURN
iptables -I FORWARD -j DOCKER
ip6tables -N DOCKER
mkdir -p "$ALLOCWATCH_CGROUP_ROOT"/cpu/docker/live
echo 1 >"$ALLOCWATCH_CGROUP_ROOT"/cpu/docker/live/tasks
"""

# As hoststate.sh's HOST_PATHS, under tmp_path: files before their directories.
HOST_PATHS = (
    "run/cdi/nvidia.yaml",
    "run/nvidia/driver",
    "var/lib/nvml-mock",
    "run/cdi",
    "run/nvidia",
)

SAVE = "{ iptables-save; ip6tables-save; } | grep -v '^#'"


def run_in_netns(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    tools = ("unshare", "iptables", "ip6tables", "nft")
    if os.geteuid() != 0 or any(shutil.which(t) is None for t in tools):
        reason = "needs root, unshare, iptables, ip6tables and nft"
        if os.environ.get("CI"):
            pytest.fail(f"teardown tests under CI: {reason}", pytrace=False)
        pytest.skip(reason)
    cgroups = tmp_path / "cgroup"
    for hierarchy in ("cpu", "memory"):
        (cgroups / hierarchy).mkdir(parents=True, exist_ok=True)
    prelude = f"""
set -euo pipefail
. {CLUSTER}/lib.sh
. {CLUSTER}/hoststate.sh
mkdir -p "$RUNDIR"
"""
    env = {
        **os.environ,
        "ALLOCWATCH_CLUSTER_STATE": str(tmp_path / "state"),
        "ALLOCWATCH_CLUSTER_LOGS": str(tmp_path / "logs"),
        "ALLOCWATCH_CGROUP_ROOT": str(cgroups),
        "ALLOCWATCH_HOST_PATHS": " ".join(str(tmp_path / p) for p in HOST_PATHS),
    }
    return subprocess.run(
        ["unshare", "-n", "bash", "-c", prelude + script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def clean_up() -> str:
    return "for fam in $IPT_FAMILIES; do host_clean_iptables $fam; done; host_clean_cgroups\n"


def test_down_puts_iptables_and_cgroups_back_as_up_found_them(tmp_path: Path) -> None:
    done = run_in_netns(
        tmp_path,
        MACHINE_DOCKER
        + f"{SAVE} >{tmp_path}/before; host_record\n"
        + KUBELET_AND_CNI
        + clean_up()
        + f"{SAVE} >{tmp_path}/after\n"
        + "echo leftovers:; host_leftovers\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "leftovers:\n", done.stdout
    before = (tmp_path / "before").read_text()
    assert "DOCKER" in before
    assert (tmp_path / "after").read_text() == before
    # the machine's Docker keeps its cgroup; ours are gone
    assert (tmp_path / "cgroup" / "cpu" / "docker" / "live").is_dir()
    assert not (tmp_path / "cgroup" / "cpu" / "kubepods").exists()
    assert not (tmp_path / "cgroup" / "memory" / "docker").exists()


def test_the_check_names_what_is_left_in_every_table_and_family(tmp_path: Path) -> None:
    done = run_in_netns(tmp_path, "host_record\n" + KUBELET_AND_CNI + "host_leftovers\n")
    assert done.returncode == 0, done.stderr
    left = done.stdout
    for expected in (
        "iptables -t filter -N KUBE-FIREWALL",
        "iptables -t filter -A INPUT -j KUBE-FIREWALL",
        "iptables -t filter -A OUTPUT -j KUBE-FIREWALL",
        '--comment "block incoming localnet connections"',
        "iptables -t nat -N KUBE-KUBELET-CANARY",
        "iptables -t mangle -N KUBE-KUBELET-CANARY",
        "iptables -t mangle -N KUBE-IPTABLES-HINT",
        "ip6tables -t mangle -N KUBE-IPTABLES-HINT",
        "ip6tables -t filter -N KUBE-KUBELET-CANARY",
        "iptables -t nat -N CNI-0a1b2c",
        "iptables -t filter -A FORWARD",
        f"cgroup {tmp_path}/cgroup/cpu/kubepods",
        f"cgroup {tmp_path}/cgroup/memory/docker",
    ):
        assert expected in left, f"{expected!r} not reported in:\n{left}"


def test_what_is_new_but_not_ours_is_left_alone_and_reported(tmp_path: Path) -> None:
    done = run_in_netns(
        tmp_path,
        "host_record\n"
        + "iptables -t nat -N SOMEONE-ELSE\niptables -t nat -A PREROUTING -j SOMEONE-ELSE\n"
        + 'mkdir "$ALLOCWATCH_CGROUP_ROOT/cpu/someone-else"\n'
        + KUBELET_AND_CNI
        + clean_up()
        + "host_leftovers\n",
    )
    assert done.returncode == 0, done.stderr
    left = done.stdout
    assert "iptables -t nat -N SOMEONE-ELSE" in left
    assert "iptables -t nat -A PREROUTING -j SOMEONE-ELSE" in left
    assert f"cgroup {tmp_path}/cgroup/cpu/someone-else" in left
    assert "KUBE-" not in left and "CNI-" not in left, left
    assert "kubepods" not in left and "/docker" not in left, left


def test_without_a_record_ours_go_by_name_and_others_stay(tmp_path: Path) -> None:
    done = run_in_netns(
        tmp_path,
        MACHINE_DOCKER
        + KUBELET_AND_CNI
        + clean_up()
        + "echo leftovers:; host_leftovers\n"
        + f"{SAVE}\n",
    )
    assert done.returncode == 0, done.stderr
    leftovers, _, save = done.stdout.partition("\n")
    assert leftovers == "leftovers:", done.stdout
    assert "KUBE-" not in save and "CNI-" not in save, save
    assert ":DOCKER - [0:0]" in save and "-A FORWARD -j DOCKER" in save, save
    assert (tmp_path / "cgroup" / "cpu" / "docker" / "live").is_dir()
    assert not (tmp_path / "cgroup" / "cpu" / "kubepods").exists()


def test_host_paths_new_since_up_go_and_those_before_stay(tmp_path: Path) -> None:
    # /run/cdi was there with a spec of the machine's own; the rest is new:
    # nvml-mock's driver root, its spec beside the machine's, the driver link.
    (tmp_path / "run" / "cdi").mkdir(parents=True)
    (tmp_path / "run" / "cdi" / "other.yaml").write_text("theirs")
    stack = (
        f"mkdir -p {tmp_path}/var/lib/nvml-mock/driver/config {tmp_path}/run/nvidia\n"
        f"echo spec >{tmp_path}/run/cdi/nvidia.yaml\n"
        f"ln -s {tmp_path}/var/lib/nvml-mock/driver {tmp_path}/run/nvidia/driver\n"
    )
    done = run_in_netns(
        tmp_path,
        "host_record\n"
        + stack
        + "host_leftovers\necho cleaned:\nhost_clean_paths\nhost_leftovers\n",
    )
    assert done.returncode == 0, done.stderr
    left, _, after = done.stdout.partition("cleaned:\n")
    for new in ("run/cdi/nvidia.yaml", "run/nvidia/driver", "var/lib/nvml-mock", "run/nvidia"):
        assert f"path {tmp_path}/{new}\n" in left, left
    assert f"path {tmp_path}/run/cdi\n" not in left, left
    assert after == "", after
    assert (tmp_path / "run" / "cdi" / "other.yaml").read_text() == "theirs"
    for gone in ("run/cdi/nvidia.yaml", "run/nvidia", "var/lib/nvml-mock"):
        assert not (tmp_path / gone).exists(), gone


def test_the_root_mount_is_shared_for_the_cluster_and_private_again_after(
    tmp_path: Path,
) -> None:
    """In a mount namespace of its own, whose root starts private as on these machines."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("findmnt") is None:
        reason = "needs root, unshare and findmnt"
        if os.environ.get("CI"):
            pytest.fail(f"teardown tests under CI: {reason}", pytrace=False)
        pytest.skip(reason)
    script = f"""
set -euo pipefail
. {CLUSTER}/lib.sh
. {CLUSTER}/hoststate.sh
mount --make-private /
host_record
host_share_root
echo "up: $(host_root_propagation)"
echo leftovers:; host_leftovers
host_restore_root
echo "down: $(host_root_propagation)"
echo leftovers:; host_leftovers
"""
    env = {
        **os.environ,
        "ALLOCWATCH_CLUSTER_STATE": str(tmp_path / "state"),
        "ALLOCWATCH_CLUSTER_LOGS": str(tmp_path / "logs"),
        "ALLOCWATCH_CGROUP_ROOT": str(tmp_path / "cgroup"),
        "ALLOCWATCH_HOST_PATHS": str(tmp_path / "none"),
    }
    (tmp_path / "cgroup" / "cpu").mkdir(parents=True)
    done = subprocess.run(
        ["unshare", "-n", "-m", "bash", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "up: shared\nleftovers:\nroot mount shared, was private\ndown: private\nleftovers:\n"
    ), done.stdout
