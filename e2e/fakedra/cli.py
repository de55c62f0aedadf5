"""`python -m e2e.fakedra`: options, signals, and waiting for the profile."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from allocwatch.profile import ProfileError

from .inventory import DraDevice, load_inventory
from .kubeapi import ApiError, KubeApi, RestClient
from .plugin import DraPlugin
from .publisher import SlicePublisher

log = logging.getLogger("fakedra")

DEFAULT_CONFIG = "/var/lib/nvml-mock/driver/config/config.yaml"
DEFAULT_DRIVER = "gpu.nvidia.com"
DEFAULT_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_PLUGIN_ROOT = "/var/lib/kubelet/plugins"


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


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
        type=_positive_float,
        default=0.5,
        help="seconds between socket checks (default %(default)s)",
    )
    p.add_argument(
        "--resync-interval",
        type=_positive_float,
        default=10.0,
        help="seconds between checks that the slice is still published (default %(default)s)",
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    return p


def wait_for_inventory(path: Path, stop: threading.Event, poll: float) -> list[DraDevice] | None:
    """The profile's GPUs, waiting while the profile is missing or invalid."""
    last_error = ""
    while not stop.is_set():
        try:
            return load_inventory(path)
        except (OSError, ProfileError, ValueError) as exc:
            error = f"profile {path}: {exc}"
        if error != last_error:
            log.warning("%s; waiting", error)
            last_error = error
        stop.wait(poll)
    return None


def make_api(server: str | None) -> KubeApi:
    return RestClient(server) if server else RestClient.in_cluster()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s.%(msecs)03dZ %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    logging.Formatter.converter = time.gmtime

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        api = make_api(args.api_server)
    except (ApiError, OSError) as exc:
        log.error("no API server: %s", exc)
        return 2
    devices = wait_for_inventory(args.config, stop, args.poll_interval)
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
