"""9. A node helper that refuses to start fails the deploy at once, in its own words,
and the next deploy starts a fresh pod instead of inheriting the restart back-off.

It runs in a namespace of its own, on a root below the stack's, so the stack
under test is not touched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from devtools.waiting import WaitAbort, wait_until
from e2e.framework import timings
from e2e.framework.manifests import render
from e2e.framework.nodefiles import NodeFiles
from e2e.framework.pods import Pods
from e2e.framework.stack import Stack

NAMESPACE = "allocwatch-e2e-refusal"
# The deploy waits up to 60 s for the helper; a refusal must end it far sooner.
SURFACED_WITHIN = 20


@pytest.fixture
def foreign_root(deployed: Stack) -> Iterator[tuple[Pods, str]]:
    root = f"{deployed.settings.nvml_mock_root}/allocwatch-e2e-refusal"
    kubectl = deployed.kubectl
    # The namespace is deleted without waiting, which took the namespace
    # controller 15-30 s: a run that starts before it is gone waits here.
    wait_until(
        lambda: not kubectl.run("get", "namespace", NAMESPACE, "--ignore-not-found", "-o", "name"),
        120,
        f"namespace {NAMESPACE} left by an earlier run to be gone",
    )
    kubectl.apply(render("namespace.yaml.j2", namespace=NAMESPACE))
    pods = Pods(kubectl, NAMESPACE, deployed.node, deployed.diagnostics)
    try:
        yield pods, root
    finally:
        try:
            NodeFiles.remove_from(pods)
        finally:
            kubectl.delete("namespace", NAMESPACE)
        deployed.kubectl.exec(deployed.ns, deployed.files.helper(), ["rm", "-rf", root])


def test_a_refusing_node_helper_says_why_at_once(
    deployed: Stack, foreign_root: tuple[Pods, str]
) -> None:
    pods, root = foreign_root
    config = f"{root}/driver/config"
    # An nvml-mock's own config.yaml, which staging did not write; the stack's
    # helper mounts the root above this one.
    session_helper = deployed.files.helper()
    deployed.kubectl.exec(
        deployed.ns, session_helper,
        ["sh", "-c", f"mkdir -p {config} && echo 'version: 1' > {config}/config.yaml"],
    )  # fmt: skip

    staging = NodeFiles(pods, deployed.files.image, root, deployed.settings.profile)
    start = time.monotonic()
    with pytest.raises(WaitAbort) as refused:
        staging.deploy()
    surfaced = time.monotonic() - start
    timings.note("node helper refusal surfaced", surfaced)
    message = str(refused.value)
    assert "cannot start" in message, message
    assert f"{config}/config.yaml is not ours" in message, message
    assert "--nvml-mock=installed" in message, message
    assert surfaced < SURFACED_WITHIN, message

    # Once the foreign file is gone, a deploy is a fresh pod: no back-off to sit out.
    deployed.kubectl.exec(deployed.ns, session_helper, ["rm", f"{config}/config.yaml"])
    start = time.monotonic()
    staging.deploy()
    redeployed = time.monotonic() - start
    timings.note("node helper re-deployed after a refusal", redeployed)
    assert redeployed < SURFACED_WITHIN
    assert [d.uuid for d in staging.devices()] == [d.uuid for d in deployed.files.devices()]
