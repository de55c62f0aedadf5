"""`python -m fakeplugin`: options, signals, and waiting for the profile."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from allocwatch.profile import ProfileError, load_devices

from .devices import build_inventory
from .plugin import DevicePlugin, default_socket_name

log = logging.getLogger("fakeplugin")

DEFAULT_CONFIG = "/var/lib/nvml-mock/driver/config/config.yaml"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
DEFAULT_RESOURCE_NAME = "nvidia.com/gpu"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def _resource_name(text: str) -> str:
    domain, sep, name = text.partition("/")
    if not sep or not domain or not name or domain.endswith("kubernetes.io"):
        raise argparse.ArgumentTypeError(f"{text!r} is not an extended resource name")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fakeplugin",
        description="Advertise the GPUs of an nvml-mock profile to the kubelet.",
    )
    p.add_argument(
        "--config",
        type=Path,
        default=Path(DEFAULT_CONFIG),
        help="nvml-mock profile to read the GPU UUIDs from (default %(default)s)",
    )
    p.add_argument(
        "--resource-name",
        type=_resource_name,
        default=DEFAULT_RESOURCE_NAME,
        help="extended resource to advertise (default %(default)s)",
    )
    p.add_argument(
        "--replicas",
        type=_positive_int,
        default=1,
        help="time-slicing replicas per GPU, advertised as <uuid>::<k> (default 1)",
    )
    p.add_argument(
        "--unhealthy",
        action="append",
        default=[],
        metavar="UUID",
        help="advertise this GPU (or replica id) as Unhealthy; repeatable",
    )
    p.add_argument(
        "--plugin-dir",
        type=Path,
        default=Path(DEFAULT_PLUGIN_DIR),
        help="the kubelet's device-plugin directory (default %(default)s)",
    )
    p.add_argument(
        "--socket-name",
        default=None,
        help="our socket's file name in --plugin-dir (default fakeplugin-<resource name>.sock)",
    )
    p.add_argument(
        "--poll-interval",
        type=_positive_float,
        default=0.5,
        help="seconds between kubelet-restart checks (default %(default)s)",
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    return p


def wait_for_uuids(path: Path, stop: threading.Event, poll: float) -> list[str] | None:
    """The profile's GPU UUIDs, waiting while the profile is missing or invalid."""
    last_error = ""
    while not stop.is_set():
        try:
            uuids = [d.uuid for d in load_devices(path) if d.uuid]
        except (OSError, ProfileError) as exc:
            error = f"profile {path}: {exc}"
        else:
            if uuids:
                return uuids
            error = f"profile {path} names no GPU UUIDs"
        if error != last_error:
            log.warning("%s; waiting", error)
            last_error = error
        stop.wait(poll)
    return None


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

    uuids = wait_for_uuids(args.config, stop, args.poll_interval)
    if uuids is None:
        return 0
    try:
        devices = build_inventory(uuids, args.replicas, args.unhealthy)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    plugin = DevicePlugin(
        devices,
        args.resource_name,
        args.plugin_dir,
        args.socket_name or default_socket_name(args.resource_name),
        poll_interval=args.poll_interval,
    )
    log.info(
        "advertising %s: %s",
        args.resource_name,
        ", ".join(f"{d.id}{'' if d.healthy else ' (unhealthy)'}" for d in devices),
    )
    plugin.run(stop)
    return 0
