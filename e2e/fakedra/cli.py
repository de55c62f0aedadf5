"""`python -m e2e.fakedra`: options, signals, and waiting for the profile."""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from e2e.kubeletplugin.process import (
    configure_logging,
    positive_float,
    stop_on_signals,
    wait_for_profile,
)

from .inventory import load_inventory
from .kubeapi import ApiError, KubeApi, RestClient
from .plugin import DraPlugin
from .publisher import SlicePublisher

log = logging.getLogger("fakedra")

DEFAULT_CONFIG = "/var/lib/nvml-mock/driver/config/config.yaml"
DEFAULT_DRIVER = "gpu.nvidia.com"
DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_PLUGIN_ROOT = "/var/lib/kubelet/plugins"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fakedra",
        description="Publish the GPUs of an nvml-mock profile as a DRA driver's ResourceSlice.",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=Path(DEFAULT_CONFIG),
        help="nvml-mock profile to read the GPUs from (default %(default)s)",
    )
    p.add_argument(
        "--driver",
        default=DEFAULT_DRIVER,
        help="DRA driver name, also the DeviceClass name (default %(default)s)",
    )
    p.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="this node, also the pool name (default $NODE_NAME, else the host name)",
    )
    p.add_argument(
        "--api-server",
        default=None,
        metavar="URL",
        help="API server URL used without credentials, e.g. kubectl proxy's "
        "(default: in-cluster, as the pod's service account)",
    )
    p.add_argument(
        "--registry-dir",
        type=Path,
        default=Path(DEFAULT_REGISTRY_DIR),
        help="the kubelet's plugin registry directory (default %(default)s)",
    )
    p.add_argument(
        "--plugin-root",
        type=Path,
        default=Path(DEFAULT_PLUGIN_ROOT),
        help="our socket goes to <root>/<driver>/dra.sock (default %(default)s)",
    )
    p.add_argument(
        "--poll-interval",
        type=positive_float,
        default=0.5,
        help="seconds between socket checks (default %(default)s)",
    )
    p.add_argument(
        "--resync-interval",
        type=positive_float,
        default=10.0,
        help="seconds between checks that the slice is still published (default %(default)s)",
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    return p


def make_api(server: str | None) -> KubeApi:
    return RestClient(server) if server else RestClient.in_cluster()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    stop = stop_on_signals(log)

    try:
        api = make_api(args.api_server)
    except (ApiError, OSError) as exc:
        log.error("no API server: %s", exc)
        return 2
    devices = wait_for_profile(
        args.config, load_inventory, (OSError, ValueError), stop, args.poll_interval, log
    )
    if devices is None:
        return 0
    publisher = SlicePublisher(api, args.driver, args.node_name, devices)
    log.info(
        "driver %s on node %s: %s",
        args.driver,
        args.node_name,
        ", ".join(f"{d.name}={d.uuid}" for d in devices),
    )
    DraPlugin(
        api,
        publisher,
        args.registry_dir,
        args.plugin_root,
        poll_interval=args.poll_interval,
        resync_interval=args.resync_interval,
    ).run(stop)
    return 0
