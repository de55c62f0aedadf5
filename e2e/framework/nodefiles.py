"""nvml-mock's files on the node, through the node helper: a root pod that mounts its root.

With a profile the helper plays nvml-mock's setup.sh and stages it as
config.yaml; without one it only gives access to an installed nvml-mock's
files. Either way the tests use it to read and write them as nvml-mock would.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from allocwatch.profile import Device, parse_profile
from devtools.waiting import wait_until

from .expected import engine_problems, without_readings
from .manifests import render
from .pods import Pods

NODE_SCRIPTS = Path(__file__).resolve().parent / "node_scripts"
# Written beside the config.yaml the node helper stages: what unstage may remove.
STAGE_MARKER = ".allocwatch-e2e-staged"
HELPER = "node-helper"
HELPER_LABELS = f"app.kubernetes.io/name={HELPER}"

# Prints whether another process holds the flock on argv[1].
LOCK_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("true")
else:
    print("false")
"""


def script(name: str) -> str:
    return (NODE_SCRIPTS / f"{name}.py").read_text()


def unstage_command(nvml_mock_root: str) -> str:
    """The shell that removes what staging wrote, and only when its marker says so."""
    staged = " ".join(f"$c/{f}" for f in ("config.yaml", "overrides.yaml", "overrides.yaml.lock"))
    return (
        f"c={nvml_mock_root}/driver/config; [ -e $c/{STAGE_MARKER} ] || exit 0; "
        f"rm -f {staged} $c/{STAGE_MARKER}; rmdir $c {nvml_mock_root}/driver 2>/dev/null; true"
    )


class NodeFiles:
    def __init__(self, pods: Pods, image: str, nvml_mock_root: str, profile: Path | None) -> None:
        self.pods = pods
        self.image = image
        self.root = nvml_mock_root
        # None: an nvml-mock is installed on the node and owns config.yaml
        self.profile = profile

    @property
    def overrides_path(self) -> str:
        return f"{self.root}/driver/config/overrides.yaml"

    @property
    def config_path(self) -> str:
        return f"{self.root}/driver/config/config.yaml"

    def deploy(self) -> None:
        """(Re)create the helper: a fresh pod, so no restart back-off carries over."""
        self.remove()
        self.pods.kubectl.apply(
            render(
                "node-helper.yaml.j2",
                namespace=self.pods.namespace,
                node=self.pods.node,
                image=self.image,
                stage=self.profile is not None,
                profile=self.profile.read_text() if self.profile else "",
                nvml_mock_root=self.root,
                marker=STAGE_MARKER,
            )
        )
        self.helper()

    def remove(self) -> None:
        self.remove_from(self.pods)

    @staticmethod
    def remove_from(pods: Pods) -> None:
        """The helper gone from `pods`' namespace, its pod included."""
        pods.kubectl.delete("daemonset", HELPER, "-n", pods.namespace, wait=True)
        pods.wait_gone(HELPER_LABELS)

    def helper(self) -> str:
        return self.pods.wait_ready(HELPER_LABELS, timeout=60)

    def devices(self) -> list[Device]:
        """The profile the node's nvml-mock serves (ours when staged)."""
        ns = self.pods.namespace
        return parse_profile(self.pods.kubectl.exec(ns, self.helper(), ["cat", self.config_path]))

    def read(self, pod: str | None = None) -> tuple[bool, Any]:
        """(exists, parsed overrides.yaml), read in `pod` (any that mounts the root at
        the same path; default the helper) and checked as the engine would read it."""
        result = self.pods.python(
            pod or self.helper(), script("read_overrides"), self.overrides_path
        )
        if result["exists"]:
            problems = engine_problems(result["doc"], result["mode"])
            assert not problems, f"overrides.yaml as the engine would read it: {problems}"
        return bool(result["exists"]), result["doc"]

    def read_raw(self, pod: str) -> Any:
        """What the read script reports, unchecked (for diagnostics)."""
        return self.pods.python(pod, script("read_overrides"), self.overrides_path, timeout=10)

    def patch_overrides(self, patch: dict[str, Any]) -> Any:
        """Deep-merge `patch` (a null deletes its key) under nvml-mock's lock."""
        return self._change_overrides({"merge": patch})

    def _change_overrides(self, change: dict[str, Any]) -> Any:
        return self.pods.python(
            self.helper(), script("patch_overrides"), self.overrides_path, json.dumps(change)
        )["doc"]

    @contextlib.contextmanager
    def foreign_keys_restored(self, published: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Yields the document less our readings (of devices `published`, "<index>");
        puts exactly that back afterwards.

        On a node running a real nvml-mock (`--nvml-mock=installed`) the file
        may hold someone's own overrides, which a test's keys must neither
        replace for good nor be compared without. The readings present at
        the end are kept: the watcher may still be publishing them.
        """
        exists, doc = self.read()
        found = without_readings(doc if exists else None, published)
        try:
            yield found
        finally:
            self._change_overrides({"replace": found})

    @contextlib.contextmanager
    def holding_lock(self, patch_on_release: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """nvml-mock's lock, held by the node helper for the block; then it writes a patch.

        Yields a dict that receives the helper's report once released:
        {"changed_while_held": bool, "held_for": seconds, "doc": ...}.
        """
        helper = self.helper()
        release = f"/tmp/allocwatch-e2e-release-{uuid.uuid4().hex}"
        report: dict[str, Any] = {}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            holding = pool.submit(
                self.pods.python,
                helper,
                script("patch_overrides"),
                self.overrides_path,
                json.dumps({"merge": patch_on_release}),
                release,
                "120",
                timeout=150,
            )
            try:
                wait_until(
                    lambda: holding.done() or self.lock_held(),
                    30,
                    "the node helper to take nvml-mock's lock",
                    diagnostics=self.pods.diagnostics,
                )
                yield report
            finally:
                self.pods.kubectl.exec(self.pods.namespace, helper, ["touch", release])
                report.update(holding.result(timeout=60))

    def lock_held(self) -> bool:
        return bool(self.pods.python(self.helper(), LOCK_PROBE, f"{self.overrides_path}.lock"))

    def lock_file_exists(self) -> bool:
        lock = f"{self.overrides_path}.lock"
        found = self.pods.kubectl.exec(
            self.pods.namespace, self.helper(), ["sh", "-c", f"[ -f {lock} ] && echo y || echo n"]
        )
        return found.strip() == "y"

    def remove_overrides_and_time_restore(self, timeout: float) -> tuple[float | None, Any]:
        result = self.pods.python(
            self.helper(),
            script("remove_overrides"),
            self.overrides_path,
            str(timeout),
            timeout=timeout + 30,
        )
        return result["restored_after"], result["doc"]

    def unstage(self) -> None:
        """Remove the files staging created (only when the helper's marker says we did)."""
        if self.profile is not None:
            self.pods.kubectl.exec(
                self.pods.namespace, self.helper(), ["sh", "-c", unstage_command(self.root)]
            )
