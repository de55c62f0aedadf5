"""A real kube-apiserver and its etcd, started as processes for tests and benchmarks.

The binaries are the local cluster's: `hack/cluster/build.sh` builds
kube-apiserver, kubectl and etcd from Go modules into the cache. `locate()`
finds this tree's build (the same cache key `hack/cluster/lib.sh` computes),
or the directories named by ALLOCWATCH_K8S_BIN and ALLOCWATCH_ETCD_BIN. No
kubelet runs: pods are created already bound to a node name, and stay
Pending. A dev-only package, not in the wheel, like `fakekubelet`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "hack" / "cluster" / "lib.sh"
ADMIN_TOKEN = "admin-token"


class ApiServerUnavailable(RuntimeError):
    """The binaries are not built here."""


@dataclass(frozen=True)
class Binaries:
    k8s: Path  # holds kube-apiserver and kubectl
    etcd: Path  # holds etcd

    def missing(self) -> list[str]:
        wanted = [self.k8s / "kube-apiserver", self.k8s / "kubectl", self.etcd / "etcd"]
        return [str(p) for p in wanted if not os.access(p, os.X_OK)]


def locate() -> Binaries:
    """This tree's cluster binaries, or those the environment names."""
    k8s, etcd = os.environ.get("ALLOCWATCH_K8S_BIN"), os.environ.get("ALLOCWATCH_ETCD_BIN")
    if not (k8s and etcd):
        script = f'. "{LIB}" && go_env && printf "%s\\n%s\\n" "$K8S_BIN" "$ETCD_BIN"'
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ApiServerUnavailable(f"hack/cluster/lib.sh: {proc.stderr.strip()}")
        k8s, etcd = proc.stdout.split()
    found = Binaries(Path(k8s), Path(etcd))
    if found.missing():
        raise ApiServerUnavailable(
            f"not built: {', '.join(found.missing())} (run hack/cluster/build.sh)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class ApiServer:
    """etcd and kube-apiserver on free loopback ports, under `workdir`; a context manager.

    Authentication is by static token (ADMIN_TOKEN is in system:masters) and by
    service-account tokens; authorization is RBAC, as on a real cluster.
    """

    def __init__(self, binaries: Binaries, workdir: Path) -> None:
        self.binaries = binaries
        self.dir = workdir
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = workdir / "ca.crt"
        self.kubeconfig = workdir / "admin.kubeconfig"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> ApiServer:
        try:
            self._pki()
            self._start_etcd()
            self.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for name in ("kube-apiserver", "etcd"):
            self._end(name)

    def _pki(self) -> None:
        d = self.dir
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                 "-subj", "/CN=test-ca", cwd=d)  # fmt: skip
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=kube-apiserver",
                 cwd=d)  # fmt: skip
        (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.crt",
                 cwd=d)  # fmt: skip
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=d)
        (d / "tokens.csv").write_text(f"{ADMIN_TOKEN},admin,admin,system:masters\n")
        self.kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
            f"clusters: [{{name: test, cluster: {{server: '{self.url}', "
            f"certificate-authority: '{self.ca}'}}}}]\n"
            "contexts: [{name: admin, context: {cluster: test, user: admin}}]\n"
            f"users: [{{name: admin, user: {{token: {ADMIN_TOKEN}}}}}]\n"
        )

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            str(self.binaries.etcd / "etcd"), "--name=test", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=test=http://127.0.0.1:{peer}", "--log-level=warn",
        ])  # fmt: skip

    def start(self) -> None:
        """Start kube-apiserver (again, after `kill`) and wait until it is ready."""
        d = self.dir
        self._spawn("kube-apiserver", [
            str(self.binaries.k8s / "kube-apiserver"), f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={self.port}",
            f"--tls-cert-file={d / 'server.crt'}", f"--tls-private-key-file={d / 'server.key'}",
            f"--cert-dir={d / 'certs'}", f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={d / 'sa.key'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            # no controller-manager makes the namespaces' default ServiceAccount
            "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none", "--profiling=false",
        ])  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            ready = self.kubectl("get", "--raw=/readyz", check=False)
            if ready.returncode == 0:
                return
            if self._procs["kube-apiserver"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kube-apiserver not ready:\n{self.log_tail('kube-apiserver')}")
            time.sleep(0.2)

    def kill(self) -> None:
        """Stop kube-apiserver, as an outage does; `start` brings it back on the same port."""
        self._end("kube-apiserver")

    def pause(self) -> None:
        """Freeze kube-apiserver: connections stay open and nothing answers."""
        self._procs["kube-apiserver"].send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._procs["kube-apiserver"].send_signal(signal.SIGCONT)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.binaries.k8s / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def service_account_dir(self, namespace: str, name: str, target: Path) -> Path:
        """What the kubelet mounts for a pod of that ServiceAccount: token, ca.crt, namespace."""
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=1h").stdout
        target.mkdir(parents=True, exist_ok=True)
        (target / "token").write_text(token.strip())
        (target / "namespace").write_text(namespace)
        (target / "ca.crt").write_bytes(self.ca.read_bytes())
        return target

    def log_tail(self, name: str, lines: int = 40) -> str:
        text = (self.dir / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.dir / f"{name}.log").open("ab")
        self._procs[name] = subprocess.Popen(argv, stdout=log, stderr=log, cwd=self.dir)
        log.close()

    def _end(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGCONT)  # a paused one cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
