"""`make demo` / `make demo-down`: the real stack on the local cluster, left running.

    demo.py up     deploy nvml-mock (its chart), NVIDIA's device plugin and
                   allocwatch (its chart), print nvidia-smi before and after one
                   GPU pod, time-slice a second pod onto its GPU, and say how to
                   go on by hand
    demo.py down   remove all of it, and the files nvml-mock laid out

The deployment is the e2e suite's real stack (e2e/framework/realstack.py), so
what the demo shows is what CI checks, on a node of one GPU (nvml-mock's t4
profile cut to its first) that NVIDIA's plugin advertises twice.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from allocwatch.render import render_document
from e2e.conftest import pick_node
from e2e.framework.helm import Helm
from e2e.framework.kubectl import Kubectl
from e2e.framework.providers import LocalProvider, ProviderUnavailable
from e2e.framework.realimages import RealImages
from e2e.framework.realstack import CHART, NODE_VIEW, SLEEP, RealStack
from hack.demo_timeline import Sampler, draw

NAMESPACE = "allocwatch-demo"
# Pods may declare their load: the chart's own scenario values turn it on.
DECLARED_LOAD = CHART / "ci" / "declared-load-values.yaml"
INFER_LOAD = {"allocwatch.dev/gpu-memory": "4Gi", "allocwatch.dev/gpu-utilization": "30"}
TIMELINE = Path("demo-timeline.png")
# the nvml-mock profile the demo's one GPU comes from (e2e/realstack/nvml-mock-values.yaml's)
PROFILE = "t4.yaml"
# nvidia-smi samples (one a second) taken before, and between, the pods' comings and goings
IDLE_SAMPLES, HELD_SAMPLES = 5, 12
# What nvml-mock's pods leave on the node when they are stopped uncleanly;
# the directories only when empty (something else may use them).
NODE_FILES = ("/run/nvidia/driver", "/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvml-mock-nri.yaml")
NODE_DIRS = (
    "/var/lib/nvml-mock",
    "/run/nvidia",
    "/var/run/cdi",
    # the chart's node-feature-discovery hostPath, made even with the feature off
    "/etc/kubernetes/node-feature-discovery/features.d",
    "/etc/kubernetes/node-feature-discovery",
    "/etc/kubernetes",
)


class OneGpuStack(RealStack):
    """The real stack on one GPU, time-sliced in two.

    NVIDIA's plugin spreads time-slicing replicas over a node's GPUs, so on
    the profile's four the second pod would get a GPU of its own. Running
    five pods to fill them was rejected: the picture would be four GPUs
    busy, not one shared.
    """

    def nvml_mock_values(self) -> list[str]:
        chart_profile = self.images.nvml_mock_chart / "profiles" / PROFILE
        profile = one_gpu(yaml.safe_load(chart_profile.read_text()))
        # rendered as allocwatch writes for the engine: quoted where Go's YAML
        # would read a string (a serial like "0421819085400") as a number
        return ["--set-literal", f"gpu.customConfig={render_document(profile)}"]

    def deploy_allocator(self) -> None:
        self.deploy_plugin(replicas=2)


def one_gpu(profile: dict[str, Any]) -> dict[str, Any]:
    """An nvml-mock profile cut to its first device, and its PCIe topology to that device."""
    first = profile["devices"][0]
    cut = {**profile, "devices": [first]}
    if "pcie_topology" in profile:
        bus = first.get("pci", {}).get("bus_id")
        topology = profile["pcie_topology"]
        cut["pcie_topology"] = {
            **topology,
            "root_complexes": [
                {**rc, "devices": [d for d in rc.get("devices", []) if d == bus]}
                for rc in topology.get("root_complexes", [])
            ],
        }
    return cut


def stack() -> RealStack:
    provider = LocalProvider()
    provider.setup()
    images = RealImages.from_env(provider.found, "local cluster (run `make cluster-images`)")
    kubectl = Kubectl(provider.kubeconfig, provider.kubectl_bin)
    node = pick_node(kubectl, None)
    return OneGpuStack(kubectl, Helm(provider.kubeconfig), images, node, NAMESPACE)


def up(real: RealStack) -> None:
    print(f"deploying nvml-mock, NVIDIA's device plugin and allocwatch on {real.node} ...")
    real.deploy()
    real.install_allocwatch(DECLARED_LOAD)
    real.wait_rows({}, 60, "an idle node")
    print(f"\n$ kubectl -n {NAMESPACE} exec {NODE_VIEW} -- nvidia-smi    # idle\n")
    print(real.smi.table(NAMESPACE, NODE_VIEW))
    with Sampler(real, NAMESPACE) as sampler:
        sampler.wait_samples(IDLE_SAMPLES)
        sampler.mark("train starts")
        pod = real.start_pod("train")
        (uuid,) = [row.uuid for row in real.smi.rows(NAMESPACE, pod)]
        real.wait_rows({uuid: 1}, 60, "the pod's GPU to rise")
        print(f"$ kubectl -n {NAMESPACE} exec {NODE_VIEW} -- nvidia-smi    # {pod} holds {uuid}\n")
        print(real.smi.table(NAMESPACE, NODE_VIEW))
        sampler.wait_samples(HELD_SAMPLES)
        sampler.mark(f"infer starts, time-sliced ({', '.join(INFER_LOAD.values())})")
        infer = real.start_pod("infer", annotations=INFER_LOAD)
        shared = [row.uuid for row in real.smi.rows(NAMESPACE, infer)]
        if shared != [uuid]:
            raise SystemExit(f"demo: {infer} got {shared}, not {pod}'s {uuid}")
        sampler.wait_samples(HELD_SAMPLES)
        print(f"$ kubectl -n {NAMESPACE} exec {NODE_VIEW} -- nvidia-smi    # {pod} and {infer}\n")
        print(real.smi.table(NAMESPACE, NODE_VIEW))
        sampler.mark("both deleted")
        real.delete_pods([pod, infer])
        sampler.wait_samples(HELD_SAMPLES)
    draw(sampler.timeline, TIMELINE, "nvidia-smi in the node view, second by second")
    print(f"nvidia-smi's memory, utilization, power and temperature over that run: {TIMELINE}\n")
    # The demo's pods leave on SIGTERM, so `kubectl delete pod` frees the GPU at once.
    container = {
        "name": "main",
        "image": real.images.nvml_mock,
        "command": SLEEP,
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    pod_spec = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "more"}}
    manifest = json.dumps({**pod_spec, "spec": {"containers": [container]}}, separators=(",", ":"))
    print(
        f"""The stack is left running. Go on by hand, as root:

  . hack/cluster/env.sh                      # KUBECONFIG, and the cluster's kubectl on PATH
  kubectl -n {NAMESPACE} apply -f - <<<'{manifest}'
  kubectl -n {NAMESPACE} exec {NODE_VIEW} -- nvidia-smi      # every GPU
  kubectl -n {NAMESPACE} exec more -- nvidia-smi           # only its own GPU
  kubectl -n {NAMESPACE} delete pod more                   # back to idle
  kubectl -n nvml-mock exec ds/nvml-mock -c nvml-mock -- nvml-mock-ctl temp --gpu 0 80

make demo-down removes it all."""
    )


def down(real: RealStack) -> None:
    real.cleanup()
    for path in NODE_FILES:
        if os.path.lexists(path):
            os.unlink(path)
    for directory in NODE_DIRS:
        leftovers = Path(directory)
        if leftovers.is_dir() and not leftovers.is_symlink():
            if directory == "/var/lib/nvml-mock":
                shutil.rmtree(directory)  # nvml-mock's own directory, whatever it holds
            elif not any(leftovers.iterdir()):
                leftovers.rmdir()
    print("demo removed: allocwatch, the device plugin, nvml-mock and its files")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("up", "down"))
    action = parser.parse_args().action
    try:
        real = stack()
    except ProviderUnavailable as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    (up if action == "up" else down)(real)
    return 0


if __name__ == "__main__":
    sys.exit(main())
