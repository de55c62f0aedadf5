"""`python -m fakeplugin`: options, signals, and waiting for the profile."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from allocwatch.profile import ProfileError
from allocwatch.profilesource import load_devices
from e2e.kubeletplugin.process import (
    configure_logging,
    positive_float,
    stop_on_signals,
    wait_for_profile,
)

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
        type=positive_float,
        default=0.5,
        help="seconds between kubelet-restart checks (default %(default)s)",
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    return p


def load_uuids(path: Path) -> list[str]:
    """The profile's GPU UUIDs; an error if it names none."""
    uuids = [d.uuid for d in load_devices(path) if d.uuid]
    if not uuids:
        raise ProfileError("the profile names no GPU UUIDs")
    return uuids


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    stop = stop_on_signals(log)

    uuids = wait_for_profile(
        args.config, load_uuids, (OSError, ProfileError), stop, args.poll_interval, log
    )
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
