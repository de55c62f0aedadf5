"""What `helm template` renders for the chart, value set by value set."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from allocwatch.flags import build_parser
from tests.chart.fakeapiserver import api_server
from tests.chart.helmtool import CHART, NAMESPACE, RELEASE, REPO_ROOT, Helm, container, only

RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount"}
DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
K0S_SOCKET = "/var/lib/k0s/kubelet/pod-resources/kubelet.sock"


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "DaemonSet")["spec"]["template"]["spec"]
    return spec


def volume(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [v for v in pod_spec(objects)["volumes"] if v["name"] == name]
    assert len(found) == 1, pod_spec(objects)["volumes"]
    return found[0]


def mount(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [m for m in container(objects)["volumeMounts"] if m["name"] == name]
    assert len(found) == 1, container(objects)["volumeMounts"]
    return found[0]


def test_chart_versions_follow_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == project["version"]
    assert chart["version"] == project["version"]
    assert chart["kubeVersion"].startswith(">=")


def test_defaults_render_one_daemonset_only(helm: Helm) -> None:
    objects = helm.render()
    assert [o["kind"] for o in objects] == ["DaemonSet"]
    ds = objects[0]
    assert ds["metadata"]["name"] == f"{RELEASE}-allocwatch"
    assert ds["metadata"]["namespace"] == NAMESPACE


def test_default_args(helm: Helm) -> None:
    assert container(helm.render())["args"] == [
        f"--socket={DEFAULT_SOCKET}",
        "--driver-root=/var/lib/nvml-mock/driver",
        "--interval=500ms",
        "--used-fraction=0.5",
        "--resource-name=nvidia.com/gpu",
        "--resource-name=nvidia.com/gpu.shared",
        "--dra-driver=gpu.nvidia.com",
        "--metrics-address=:9477",
        "--log-format=text",
        "--log-level=info",
        "--busy-utilization=70-90",
    ]


def test_container_runs_the_watcher_from_the_image(helm: Helm) -> None:
    c = container(helm.render())
    assert c["image"] == "localhost/allocwatch:0.1.0"
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert "command" not in c, "the image's ENTRYPOINT is allocwatch"
    # a refused flag (exit 2) is read in `kubectl describe`, not only in the logs
    assert c["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"} in c["env"]


def test_default_mounts(helm: Helm) -> None:
    objects = helm.render()
    assert mount(objects, "host-pod-resources") == {
        "name": "host-pod-resources",
        "mountPath": "/var/lib/kubelet/pod-resources",
        "readOnly": True,
    }
    assert volume(objects, "host-pod-resources")["hostPath"] == {
        "path": "/var/lib/kubelet/pod-resources",
        "type": "Directory",
    }
    root = mount(objects, "host-nvml-mock")
    assert root["mountPath"] == "/var/lib/nvml-mock"
    assert not root.get("readOnly", False), "the watcher writes overrides.yaml"
    assert volume(objects, "host-nvml-mock")["hostPath"] == {
        "path": "/var/lib/nvml-mock",
        "type": "DirectoryOrCreate",
    }
    assert len(pod_spec(objects)["volumes"]) == 2


def test_custom_socket_path_moves_arg_mount_and_volume(helm: Helm) -> None:
    objects = helm.render({"podResourcesSocket": K0S_SOCKET})
    assert f"--socket={K0S_SOCKET}" in container(objects)["args"]
    assert mount(objects, "host-pod-resources")["mountPath"] == "/var/lib/k0s/kubelet/pod-resources"
    assert volume(objects, "host-pod-resources")["hostPath"] == {
        "path": "/var/lib/k0s/kubelet/pod-resources",
        "type": "Directory",
    }


def test_upstream_style_values_map_to_args(helm: Helm) -> None:
    args = container(helm.render({"interval": "2s", "usedFractionPerClaim": 0.25}))["args"]
    assert "--interval=2s" in args
    assert "--used-fraction=0.25" in args


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("usedFractionPerClaim=0.25", "--used-fraction=0.25"),
        ("usedFractionPerClaim=1", "--used-fraction=1"),
        ("interval=2", "--interval=2"),
        ("interval=1m30s", "--interval=1m30s"),
    ],
)
def test_set_on_the_command_line(helm: Helm, flag: str, expected: str) -> None:
    """--set yields strings for floats and ints for whole numbers; both must work."""
    assert expected in container(helm.render(None, "--set", flag))["args"]


def test_custom_root_resources_and_flags(helm: Helm) -> None:
    objects = helm.render(
        {
            "nvmlMockRoot": "/opt/nvml-mock",
            "resourceNames": ["example.com/gpu"],
            "draDrivers": ["gpu.nvidia.com", "gpu.example.com"],
            "logFormat": "json",
            "logLevel": "debug",
            "keepReadingsOnExit": True,
            "extraArgs": ["--dial-timeout=30s"],
            "extraEnv": [{"name": "TZ", "value": "UTC"}],
        }
    )
    c = container(objects)
    assert c["args"] == [
        f"--socket={DEFAULT_SOCKET}",
        "--driver-root=/opt/nvml-mock/driver",
        "--interval=500ms",
        "--used-fraction=0.5",
        "--resource-name=example.com/gpu",
        "--dra-driver=gpu.nvidia.com",
        "--dra-driver=gpu.example.com",
        "--metrics-address=:9477",
        "--log-format=json",
        "--log-level=debug",
        "--keep-readings-on-exit",
        "--busy-utilization=70-90",
        "--dial-timeout=30s",
    ]
    assert {"name": "TZ", "value": "UTC"} in c["env"]
    assert mount(objects, "host-nvml-mock")["mountPath"] == "/opt/nvml-mock"
    assert volume(objects, "host-nvml-mock")["hostPath"]["path"] == "/opt/nvml-mock"


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"podResourcesSocket": K0S_SOCKET, "interval": "1m30s", "usedFractionPerClaim": 1},
        {"metrics": {"enabled": False}, "logFormat": "json", "keepReadingsOnExit": True},
        {"extraArgs": ["--dial-timeout=30s", "--log-level=warning"]},
    ],
    ids=["defaults", "k0s", "no-metrics", "extra-args"],
)
def test_rendered_args_parse_with_the_watcher_cli(helm: Helm, values: dict[str, Any]) -> None:
    """The chart and the CLI agree: the real parser accepts every rendered command line."""
    args = container(helm.render(values))["args"]
    parsed = build_parser().parse_args(args)
    assert parsed.socket == values.get("podResourcesSocket", DEFAULT_SOCKET)
    assert parsed.driver_root == "/var/lib/nvml-mock/driver"


def test_security_context(helm: Helm) -> None:
    objects = helm.render()
    spec = pod_spec(objects)
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "default"
    assert spec.get("hostNetwork", False) is False
    assert spec.get("hostPID", False) is False
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsUser"] == 0
    assert pod_sc["runAsNonRoot"] is False
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objects)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc.get("privileged", False) is False
    assert 2 <= spec["terminationGracePeriodSeconds"] <= 30


def test_probes_on_the_named_metrics_port(helm: Helm) -> None:
    c = container(helm.render())
    assert c["ports"] == [{"name": "metrics", "containerPort": 9477, "protocol": "TCP"}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_metrics_port_value_moves_port_and_address(helm: Helm) -> None:
    c = container(helm.render({"metrics": {"port": 9500}}))
    assert c["ports"][0]["containerPort"] == 9500
    assert "--metrics-address=:9500" in c["args"]


def test_a_privileged_metrics_port_is_refused(helm: Helm) -> None:
    # The container drops every capability: on a runtime that keeps the kernel's
    # unprivileged-port floor the watcher could not bind it and would crash-loop.
    result = helm.template({"metrics": {"port": 80}})
    assert result.returncode != 0
    assert "/metrics/port" in result.stderr and "1,024" in result.stderr
    assert container(helm.render({"metrics": {"port": 1024}}))["ports"][0]["containerPort"] == 1024


def test_metrics_disabled_drops_port_and_probes(helm: Helm) -> None:
    c = container(helm.render({"metrics": {"enabled": False}}))
    assert "--metrics-address=" in c["args"]
    for key in ("ports", "readinessProbe", "livenessProbe", "startupProbe"):
        assert key not in c


def test_resources_leave_headroom_over_measured_rss(helm: Helm) -> None:
    resources = container(helm.render())["resources"]
    assert resources["requests"] == {"cpu": "10m", "memory": "64Mi"}
    assert resources["limits"] == {"cpu": "100m", "memory": "128Mi"}


def test_scheduling_defaults_land_on_nvml_mock_nodes(helm: Helm) -> None:
    objects = helm.render()
    spec = pod_spec(objects)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert "priorityClassName" not in spec
    assert only(objects, "DaemonSet")["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%"},
    }


def test_scheduling_and_pod_metadata_values(helm: Helm) -> None:
    objects = helm.render(
        {
            "priorityClassName": "system-node-critical",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [],
            "updateStrategy": {"type": "OnDelete"},
            "podAnnotations": {"example.com/a": "1"},
            "podLabels": {"team": "gpu"},
            "imagePullSecrets": [{"name": "regcred"}],
        }
    )
    ds = only(objects, "DaemonSet")
    spec = pod_spec(objects)
    assert spec["priorityClassName"] == "system-node-critical"
    # Helm merges maps with the defaults; null removes a default key.
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true"}
    assert "tolerations" not in spec
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    meta = ds["spec"]["template"]["metadata"]
    assert meta["annotations"] == {"example.com/a": "1"}
    assert meta["labels"]["team"] == "gpu"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_pod_labels_replace_the_charts_own_without_a_duplicate_key(helm: Helm) -> None:
    # render() refuses a key written twice, as the API server does
    ds = only(
        helm.render({"podLabels": {"app.kubernetes.io/component": "gpu-memory", "team": "gpu"}}),
        "DaemonSet",
    )
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "gpu-memory"
    assert labels["team"] == "gpu"
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_a_pod_label_that_would_break_the_selector_fails_clearly(helm: Helm) -> None:
    result = helm.template({"podLabels": {"app.kubernetes.io/name": "other"}})
    assert result.returncode != 0
    assert "podLabels.app.kubernetes.io/name: the DaemonSet selects its pods by this label" in (
        result.stderr
    )
    same = helm.render({"podLabels": {"app.kubernetes.io/instance": RELEASE}})
    assert (
        only(same, "DaemonSet")["spec"]["template"]["metadata"]["labels"][
            "app.kubernetes.io/instance"
        ]
        == RELEASE
    )


def test_default_node_selector_can_be_removed(helm: Helm) -> None:
    spec = pod_spec(helm.render({"nodeSelector": {"nvidia.com/gpu.present": None}}))
    assert "nodeSelector" not in spec


def test_image_tag_and_digest(helm: Helm) -> None:
    digest = "sha256:" + "a" * 64
    assert container(helm.render({"image": {"tag": "dev"}}))["image"] == "localhost/allocwatch:dev"
    c = container(
        helm.render(
            {
                "image": {
                    "repository": "registry.example/aw",
                    "digest": digest,
                    "pullPolicy": "Always",
                }
            }
        )
    )
    assert c["image"] == f"registry.example/aw:0.1.0@{digest}"
    assert c["imagePullPolicy"] == "Always"


def test_standard_labels_everywhere(helm: Helm) -> None:
    objects = helm.render({"metrics": {"serviceMonitor": {"enabled": True}}})
    assert {o["kind"] for o in objects} == {"DaemonSet", "Service", "ServiceMonitor"}
    expected = {
        "app.kubernetes.io/name": "allocwatch",
        "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/version": "0.1.0",
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/component": "allocation-watcher",
        "helm.sh/chart": "allocwatch-0.1.0",
    }
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert expected.items() <= labels.items(), (obj["kind"], labels)
    ds = only(objects, "DaemonSet")
    selector = ds["spec"]["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "allocwatch",
        "app.kubernetes.io/instance": RELEASE,
    }
    assert selector.items() <= ds["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"metrics": {"service": {"enabled": True}, "serviceMonitor": {"enabled": True}}},
        {"priorityClassName": "system-node-critical", "imagePullSecrets": [{"name": "r"}]},
    ],
    ids=["defaults", "metrics-on", "extras"],
)
def test_no_rbac_and_no_service_account(helm: Helm, values: dict[str, Any]) -> None:
    objects = helm.render(values)
    assert not {o["kind"] for o in objects} & RBAC_KINDS
    assert pod_spec(objects)["automountServiceAccountToken"] is False


def test_metrics_service(helm: Helm) -> None:
    objects = helm.render({"metrics": {"service": {"enabled": True, "annotations": {"a": "b"}}}})
    assert [o["kind"] for o in objects] == ["Service", "DaemonSet"]
    svc = only(objects, "Service")
    assert svc["metadata"]["annotations"] == {"a": "b"}
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 9477, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert svc["spec"]["selector"] == only(objects, "DaemonSet")["spec"]["selector"]["matchLabels"]


def test_service_monitor_brings_its_service(helm: Helm) -> None:
    objects = helm.render(
        {
            "metrics": {
                "serviceMonitor": {
                    "enabled": True,
                    "labels": {"release": "prom"},
                    "interval": "15s",
                }
            }
        }
    )
    svc = only(objects, "Service")
    sm = only(objects, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]


def watcher_accepts_interval(interval: object) -> bool:
    try:
        build_parser().parse_args([f"--interval={interval}"])
    except SystemExit:
        return False
    return True


@pytest.mark.parametrize("interval", ["10ms", "10000us", "0.01", "24h", "1439m60s", 86400])
def test_interval_at_the_edges_of_the_watchers_range_renders(helm: Helm, interval: Any) -> None:
    assert watcher_accepts_interval(interval)
    assert f"--interval={interval}" in container(helm.render({"interval": interval}))["args"]


@pytest.mark.parametrize("interval", ["9ms", "9999us", "0.009", "24h1ms", "86401", "5ms"])
def test_interval_the_watcher_would_refuse_is_passed_on_for_it_to_refuse(
    helm: Helm, interval: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written as text, the range is the watcher's to check: it exits 2, naming the flag."""
    args = container(helm.render({"interval": interval}))["args"]
    assert f"--interval={interval}" in args
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(args)
    assert exited.value.code == 2
    assert f"argument --interval: '{interval}' must be between 10ms and 24h" in (
        capsys.readouterr().err
    )


def test_service_without_metrics_fails_clearly(helm: Helm) -> None:
    result = helm.template({"metrics": {"enabled": False, "service": {"enabled": True}}})
    assert result.returncode != 0
    assert "need metrics.enabled=true" in result.stderr


def test_surge_without_zero_max_unavailable_fails_clearly(helm: Helm) -> None:
    result = helm.template({"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}})
    assert result.returncode != 0
    assert "maxSurge needs maxUnavailable=0" in result.stderr
    surge = {"rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0}}
    objects = helm.render({"updateStrategy": surge})
    assert only(objects, "DaemonSet")["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": 0},
    }


@pytest.mark.parametrize(
    "strategy",
    [
        {"maxUnavailable": 0},
        {"maxUnavailable": "0%", "maxSurge": 0},
    ],
)
def test_a_rollout_that_could_never_start_fails_clearly(
    helm: Helm, strategy: dict[str, Any]
) -> None:
    result = helm.template({"updateStrategy": {"rollingUpdate": strategy}})
    assert result.returncode != 0
    assert "cannot both be 0" in result.stderr


@pytest.mark.parametrize("bad", ["abc", -1, "10"])
def test_rollout_numbers_are_counts_or_percentages(helm: Helm, bad: object) -> None:
    result = helm.template({"updateStrategy": {"rollingUpdate": {"maxUnavailable": bad}}})
    assert result.returncode != 0
    assert "maxUnavailable" in result.stderr


def test_a_null_probe_is_removed_and_the_others_kept(helm: Helm) -> None:
    probes = container(helm.render({"livenessProbe": None}))
    assert "livenessProbe" not in probes
    assert probes["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert probes["startupProbe"]["periodSeconds"] == 2


def test_a_numeric_image_tag_and_a_parent_charts_enabled_key(helm: Helm) -> None:
    objects = helm.render({"image": {"tag": 42}, "enabled": True})
    assert container(objects)["image"].endswith(":42")


@pytest.mark.parametrize("tag", [1234567, 20240101, 20240101214500])
def test_a_long_numeric_image_tag_keeps_its_digits(helm: Helm, tag: int) -> None:
    # A values file gives numbers as float64, which would print as 2.0240101e+07.
    assert container(helm.render({"image": {"tag": tag}}))["image"].endswith(f":{tag}")


def test_a_numeric_image_tag_too_long_for_yaml_is_refused(helm: Helm) -> None:
    # Past 2^53 a float64 has lost digits: the schema refuses it, and the
    # value's description says to quote it.
    result = helm.template({"image": {"tag": 20240101214500123}})
    assert result.returncode != 0
    assert "at '/image/tag': maximum" in result.stderr, result.stderr
    assert container(helm.render({"image": {"tag": "20240101214500123"}}))["image"].endswith(
        ":20240101214500123"
    )


def test_notes_explain_how_to_verify_and_warn_about_the_sidecar(helm: Helm) -> None:
    result = helm.run("install", RELEASE, str(CHART), "--dry-run=client", "-n", NAMESPACE)
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "allocationWatcher.enabled=false" in notes
    assert "exec $POD -- cat /var/lib/nvml-mock/driver/config/overrides.yaml" in notes
    assert "/metrics" in notes
    assert "--field-selector spec.nodeName=<node>" in notes.split("What NVML callers see")[1]


def test_notes_follow_the_values(helm: Helm) -> None:
    args = ("install", RELEASE, str(CHART), "--dry-run=client", "-n", NAMESPACE)
    result = helm.run(*args, "--set", "interval=2", "--set", "metrics.enabled=false")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "claims every 2s" in notes
    assert "DRA (gpu.nvidia.com)" in notes
    assert "Without a readiness probe" in notes and "/metrics" not in notes


def notes(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout.split("NOTES:", 1)[1])


def test_notes_say_what_the_node_selector_expects_and_how_to_check(helm: Helm) -> None:
    """Without a cluster to ask (helm template, --dry-run=client) the notes say so."""
    text = notes(helm.run("install", RELEASE, str(CHART), "--dry-run=client", "-n", NAMESPACE))
    assert "runs only on nodes labelled nvidia.com/gpu.present=true" in text
    assert "nvml-mock's setup labels the nodes it serves" in text
    assert "did not list the cluster's nodes" in text
    assert "kubectl get nodes -l nvidia.com/gpu.present=true" in text
    assert "WARNING" not in text


def test_notes_follow_a_custom_or_empty_node_selector(helm: Helm) -> None:
    args = ("install", RELEASE, str(CHART), "--dry-run=client", "-n", NAMESPACE)
    custom = notes(helm.run(*args, "--set", "nodeSelector.gpu=yes"))
    assert "kubectl get nodes -l gpu=yes,nvidia.com/gpu.present=true" in custom
    empty = notes(helm.run(*args, "--set", "nodeSelector.nvidia\\.com/gpu\\.present=null"))
    assert "nodeSelector is empty, so the DaemonSet runs on every node" in empty
    assert "did not list" not in empty


def install_against(
    helm: Helm, nodes: dict[str, dict[str, str]], tmp: Path, *extra: str, may_list: bool = True
) -> str:
    """NOTES of a server-side dry run against an API server that holds `nodes`."""
    with api_server(nodes, tmp, may_list_nodes=may_list) as kubeconfig:
        result = helm.run(
            "install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=server",
            "--disable-openapi-validation", *extra, kubeconfig=kubeconfig,
        )  # fmt: skip
    return notes(result)


def test_notes_warn_when_no_node_matches(helm: Helm, tmp_path: Path) -> None:
    text = install_against(helm, {"n1": {"kubernetes.io/os": "linux"}, "n2": {}}, tmp_path)
    assert "WARNING: none of the cluster's 2 node(s) has these labels" in text
    assert "schedules no pod (DESIRED 0)" in text
    assert "kubectl label node <node> nvidia.com/gpu.present=true" in text
    assert "did not list" not in text


def test_notes_count_the_matching_nodes(helm: Helm, tmp_path: Path) -> None:
    gpu = {"nvidia.com/gpu.present": "true"}
    nodes = {"n1": gpu, "n2": {"nvidia.com/gpu.present": "false"}, "n3": {**gpu, "x": "y"}}
    text = install_against(helm, nodes, tmp_path)
    assert "2 of the cluster's 3 node(s) match." in text
    assert "WARNING" not in text
    both = install_against(helm, nodes, tmp_path, "--set", "nodeSelector.x=y")
    assert "1 of the cluster's 3 node(s) match." in both


def test_an_account_that_may_not_list_nodes_installs_with_lookup_nodes_off(
    helm: Helm, tmp_path: Path
) -> None:
    with api_server({}, tmp_path, may_list_nodes=False) as kubeconfig:
        args = ("install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=server")
        args += ("--disable-openapi-validation",)
        refused = helm.run(*args, kubeconfig=kubeconfig)
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower()
        allowed = helm.run(*args, "--set", "lookupNodes=false", kubeconfig=kubeconfig)
    text = notes(allowed)
    assert "did not list the cluster's nodes" in text and "lookupNodes=false" in text
