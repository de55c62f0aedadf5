"""Where the cluster comes from: kind, an existing KUBECONFIG, or the offline harness.

A provider yields a kubeconfig, the two image references the cluster can run
(`ALLOCWATCH_IMAGE`, `FAKEPLUGIN_IMAGE`), and ways to restart a node's kubelet
and to stop the API server for a while.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]


class ProviderUnavailable(RuntimeError):
    """The provider cannot run on this machine; the message says what is missing."""


@dataclass(frozen=True)
class Images:
    allocwatch: str
    fakeplugin: str

    @classmethod
    def from_env(cls, env: dict[str, str], source: str) -> Images:
        missing = [k for k in ("ALLOCWATCH_IMAGE", "FAKEPLUGIN_IMAGE") if not env.get(k)]
        if missing:
            raise ProviderUnavailable(f"{source}: {', '.join(missing)} not set")
        return cls(env["ALLOCWATCH_IMAGE"], env["FAKEPLUGIN_IMAGE"])


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (optionally `export KEY=VALUE`, shell-quoted); comments ignored."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        if sep:
            parts = shlex.split(value)
            env[key.strip()] = parts[0] if parts else ""
    return env


class Provider:
    name = "base"
    kubeconfig: Path | None = None
    kubelet_root = "/var/lib/kubelet"
    kubectl_bin: str | None = None  # None: KUBECTL or kubectl on PATH
    images: Images
    # the settings the images came from; the real stack reads its own from it
    found: dict[str, str]

    def setup(self) -> None:
        """Make the cluster reachable and the images runnable on it."""

    def teardown(self) -> None:
        """Undo what setup created (never a cluster that existed before)."""

    def kubelet_restart_unsupported(self) -> str | None:
        """Why restart_kubelet cannot work here, or None when it can."""
        return f"the {self.name} provider cannot restart a kubelet"

    def restart_kubelet(self, node: str) -> None:
        raise NotImplementedError(self.kubelet_restart_unsupported())

    def api_server_stop_unsupported(self) -> str | None:
        """Why api_server_stopped cannot work here, or None when it can."""
        return f"the {self.name} provider cannot stop the API server"

    @contextlib.contextmanager
    def api_server_stopped(self) -> Iterator[None]:
        """The API server stopped for the block, and back (ready) after it."""
        raise NotImplementedError(self.api_server_stop_unsupported())
        yield


class ExistingProvider(Provider):
    """Any cluster: KUBECONFIG (or ~/.kube/config), images from the environment.

    Set ALLOCWATCH_E2E_KUBELET_RESTART to a shell command (`$NODE` is the node
    name) to enable the kubelet-restart test.
    """

    name = "existing"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        kubeconfig = self.env.get("KUBECONFIG")
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None

    def setup(self) -> None:
        self.images = Images.from_env(self.env, "existing provider")
        self.found = self.env

    def kubelet_restart_unsupported(self) -> str | None:
        if self.env.get("ALLOCWATCH_E2E_KUBELET_RESTART"):
            return None
        return "set ALLOCWATCH_E2E_KUBELET_RESTART to a command that restarts $NODE's kubelet"

    def restart_kubelet(self, node: str) -> None:
        command = self.env["ALLOCWATCH_E2E_KUBELET_RESTART"]
        subprocess.run(command, shell=True, check=True, env=dict(self.env, NODE=node), timeout=120)


class LocalProvider(Provider):
    """The offline single-node harness under hack/cluster (`make cluster-up cluster-images`).

    Its settings come from `hack/cluster/env.sh` when that exists (sourced in
    bash, the environment it leaves behind is read), else from its state
    directory: `admin.kubeconfig` and `images.env`. The harness's values win
    over our environment's. The kubelet is restarted with
    `hack/cluster/restart-kubelet.sh`, the API server stopped and started
    with `hack/cluster/apiserver.sh`.
    """

    name = "local"
    DEFAULT_STATE = "/var/lib/allocwatch-cluster"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = dict(os.environ if env is None else env)
        self.harness = REPO_ROOT / "hack" / "cluster"

    def _harness_env(self) -> dict[str, str]:
        env_sh = self.harness / "env.sh"
        if env_sh.exists():
            proc = subprocess.run(
                ["bash", "-c", 'source "$1" >/dev/null && env -0', "env.sh", str(env_sh)],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=60,
            )
            if proc.returncode != 0:
                raise ProviderUnavailable(f"{env_sh}: {proc.stderr.strip()}")
            sourced = dict(item.split("=", 1) for item in proc.stdout.split("\0") if "=" in item)
            return {k: v for k, v in sourced.items() if self.env.get(k) != v}
        state = Path(self.env.get("ALLOCWATCH_CLUSTER_STATE", self.DEFAULT_STATE))
        found: dict[str, str] = {}
        if (state / "admin.kubeconfig").exists():
            found["KUBECONFIG"] = str(state / "admin.kubeconfig")
        if (state / "images.env").exists():
            found.update(read_env_file(state / "images.env"))
        return found

    def setup(self) -> None:
        keys = (
            "KUBECONFIG",
            "KUBECTL",
            "ALLOCWATCH_IMAGE",
            "FAKEPLUGIN_IMAGE",
            "ALLOCWATCH_KUBELET_ROOT",
            "NVML_MOCK_IMAGE",
            "NVML_MOCK_CHART",
            "DEVICE_PLUGIN_IMAGE",
        )
        env = {k: v for k, v in self.env.items() if k in keys}
        env.update(self._harness_env())
        if not env.get("KUBECONFIG"):
            raise ProviderUnavailable(
                "local provider: no kubeconfig; run `make cluster-up` (as root) first"
            )
        self.kubeconfig = Path(env["KUBECONFIG"])
        if not self.kubeconfig.exists():
            raise ProviderUnavailable(f"local provider: {self.kubeconfig} does not exist")
        self.images = Images.from_env(env, "local provider (run `make cluster-images`)")
        self.found = env
        self.kubelet_root = env.get("ALLOCWATCH_KUBELET_ROOT", "/var/lib/kubelet")
        self.kubectl_bin = self._kubectl(env)

    def _kubectl(self, env: dict[str, str]) -> str | None:
        """The harness's own kubectl (matching its API server) when it built one."""
        if env.get("KUBECTL"):
            return env["KUBECTL"]
        state = Path(self.env.get("ALLOCWATCH_CLUSTER_STATE", self.DEFAULT_STATE))
        bin_env = state / "bin.env"
        k8s_bin = env.get("K8S_BIN") or (
            read_env_file(bin_env).get("K8S_BIN") if bin_env.exists() else None
        )
        if k8s_bin and (Path(k8s_bin) / "kubectl").exists():
            return str(Path(k8s_bin) / "kubectl")
        # env.sh puts the cluster's kubectl first on PATH.
        return shutil.which("kubectl", path=env["PATH"]) if env.get("PATH") else None

    def kubelet_restart_unsupported(self) -> str | None:
        return None  # the harness always can: a missing script fails test 8, not skips it

    def restart_kubelet(self, node: str) -> None:
        script = self.harness / "restart-kubelet.sh"
        if not script.exists():
            raise RuntimeError(f"{script} does not exist: the local harness is incomplete")
        subprocess.run([str(script)], check=True, timeout=180, env=self.env)

    def api_server_stop_unsupported(self) -> str | None:
        return None

    @contextlib.contextmanager
    def api_server_stopped(self) -> Iterator[None]:
        script = str(self.harness / "apiserver.sh")
        subprocess.run([script, "stop"], check=True, timeout=120, env=self.env)
        try:
            yield
        finally:
            subprocess.run([script, "start"], check=True, timeout=180, env=self.env)


class KindProvider(Provider):
    """A kind cluster made with pytest-kind, pinned kind/node versions, images built here.

    The nodes run on Docker, or on the runtime KIND_EXPERIMENTAL_PROVIDER names
    (hack/kind runs them on nerdctl); images are built and loaded through Docker
    either way, as `kind load docker-image` reads them from it.
    """

    name = "kind"
    KIND_VERSION = "v0.31.0"
    NODE_IMAGE = (
        "kindest/node:v1.35.0"
        "@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
    )

    def __init__(
        self,
        cluster_name: str = "allocwatch-e2e",
        kind_bin: str | None = None,
        kubectl_bin: str | None = None,
        node_image: str | None = None,
        keep_cluster: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.cluster_name = cluster_name
        self.kind_bin = kind_bin or self.env.get("KIND") or shutil.which("kind")
        self.kubectl_bin = kubectl_bin or self.env.get("KUBECTL") or shutil.which("kubectl")
        self.node_image = node_image or self.NODE_IMAGE
        self.keep_cluster = keep_cluster
        self.docker = self.env.get("DOCKER") or shutil.which("docker")
        # where the node containers run: kind's own choice of runtime
        self.node_runtime = self.env.get("KIND_EXPERIMENTAL_PROVIDER") or "docker"
        self._cluster = None
        self._created = False

    def _check_tools(self) -> None:
        tools = [
            ("kind", self.kind_bin),
            ("kubectl", self.kubectl_bin),
            ("docker", self.docker),
            ("helm", self.env.get("HELM") or shutil.which("helm")),
        ]
        if self.node_runtime != "docker":
            tools.append((self.node_runtime, shutil.which(self.node_runtime)))
        missing = [n for n, p in tools if not p]
        if missing:
            raise ProviderUnavailable(f"kind provider: {', '.join(missing)} not found on PATH")
        assert self.docker is not None
        if subprocess.run([self.docker, "info"], capture_output=True).returncode != 0:
            raise ProviderUnavailable("kind provider: `docker info` fails (no Docker daemon?)")
        version = subprocess.run(
            [str(self.kind_bin), "version"], capture_output=True, text=True
        ).stdout.split()
        if len(version) > 1 and _older(version[1], self.KIND_VERSION):
            raise ProviderUnavailable(
                f"kind provider: kind {version[1]} is older than {self.KIND_VERSION}"
            )

    def setup(self) -> None:
        from pytest_kind import KindCluster  # only the kind provider needs it

        from .manifests import render

        self._check_tools()
        cluster = KindCluster(
            self.cluster_name,
            image=self.node_image,
            kind_path=Path(str(self.kind_bin)),
            kubectl_path=Path(str(self.kubectl_bin)),
        )
        existing = subprocess.run(
            [str(self.kind_bin), "get", "clusters"], capture_output=True, text=True, check=True
        ).stdout.split()
        if self.cluster_name in existing:
            # pytest-kind would leave an empty kubeconfig for a cluster it did not create.
            subprocess.run(
                [
                    str(self.kind_bin),
                    "export",
                    "kubeconfig",
                    "--name",
                    self.cluster_name,
                    "--kubeconfig",
                    str(cluster.kubeconfig_path),
                ],
                check=True,
                capture_output=True,
            )
        else:
            self._created = True
        # Images first: a failed build leaves no cluster behind.
        self.images = self._images()
        self.found = {}
        config = cluster.path / "kind-config.yaml"
        config.write_text(render("kind-config.yaml.j2"))
        self._cluster = cluster
        cluster.create(config_file=config)
        self.kubeconfig = cluster.kubeconfig_path.resolve()
        for image in (self.images.allocwatch, self.images.fakeplugin):
            cluster.load_docker_image(image)

    def _images(self) -> Images:
        if self.env.get("ALLOCWATCH_IMAGE") and self.env.get("FAKEPLUGIN_IMAGE"):
            return Images.from_env(self.env, "kind provider")
        tag = "e2e-" + time.strftime("%Y%m%d%H%M%S")
        images = Images(f"localhost/allocwatch:{tag}", f"localhost/allocwatch-fakeplugin:{tag}")
        assert self.docker is not None
        for target, ref in (("allocwatch", images.allocwatch), ("fakeplugin", images.fakeplugin)):
            argv = [self.docker, "build", "-f", "image/Dockerfile", "--target", target]
            subprocess.run([*argv, "-t", ref, "."], cwd=REPO_ROOT, check=True)
        return images

    def teardown(self) -> None:
        if self._cluster is not None and self._created and not self.keep_cluster:
            self._cluster.delete()

    def kubelet_restart_unsupported(self) -> str | None:
        return None

    def _node_exec(self, node: str, *argv: str) -> None:
        runtime = self.docker if self.node_runtime == "docker" else self.node_runtime
        assert runtime is not None
        subprocess.run([runtime, "exec", node, *argv], check=True, timeout=120)

    def restart_kubelet(self, node: str) -> None:
        self._node_exec(node, "systemctl", "restart", "kubelet")

    def api_server_stop_unsupported(self) -> str | None:
        return None

    def _api_server_ready(self) -> bool:
        argv = [str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig)]
        ready = subprocess.run(
            [*argv, "get", "--raw", "/readyz", "--request-timeout=5s"],
            capture_output=True,
            timeout=30,
        )
        return ready.returncode == 0

    @contextlib.contextmanager
    def api_server_stopped(self) -> Iterator[None]:
        # kubeadm runs the API server as a static pod: its manifest moved out of
        # the kubelet's directory stops it, moved back starts it. Stopping the
        # node's container instead would take the kubelet and the pods with it.
        node = f"{self.cluster_name}-control-plane"
        manifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"
        parked = "/etc/kubernetes/kube-apiserver.yaml.stopped"
        self._node_exec(node, "mv", manifest, parked)
        try:
            wait_until(lambda: not self._api_server_ready(), 120, "the API server to stop")
            yield
        finally:
            self._node_exec(node, "mv", parked, manifest)
            wait_until(self._api_server_ready, 180, "the API server to be ready again")


def _older(version: str, floor: str) -> bool:
    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.lstrip("v").split("-")[0].split(".")[:3])

    try:
        return parts(version) < parts(floor)
    except ValueError:
        return False
