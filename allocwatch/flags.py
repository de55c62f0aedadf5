"""The `allocwatch` flags: their parser, types and defaults; each flag checks its own value."""

from __future__ import annotations

import argparse
import math
import os
import re

from allocwatch import __version__
from allocwatch.activity import DEFAULT_BUSY, Band
from allocwatch.declaredload import parse_band
from allocwatch.durations import parse_duration
from allocwatch.health import parse_address
from allocwatch.logs import LEVELS
from allocwatch.podresources import DEFAULT_DRA_DRIVERS, DEFAULT_RESOURCE_NAMES, DEFAULT_SOCKET

DEFAULT_DRIVER_ROOT = "/var/lib/nvml-mock/driver"
DEFAULT_INTERVAL = "500ms"
DEFAULT_METRICS_ADDRESS = ":9477"


# An interval shorter than a poll only spins a core and can never be ready
# (3 intervals); past a day, the sleep overflows the clock.
MIN_INTERVAL, MAX_INTERVAL = 0.01, 86400.0
# The kubelet serves pod-resources at a fixed rate shared by every client on
# the node (the warning names it); below this interval we take a large share.
KUBELET_SHARE_INTERVAL = 0.1


class GivenAction(argparse.Action):
    """Stores the value and notes that the flag was given, not defaulted."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def _interval(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 10ms and 24h")
    return seconds


# ASCII decimal only: float() also takes `1_0` (as 10), spaces, and other
# scripts' digits, none of which a Go flag parser or a chart value means.
_DECIMAL = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?")


def _fraction(text: str) -> float:
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a decimal number")
    value = float(text)
    if math.isnan(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


def _band(text: str) -> Band:
    try:
        return parse_band(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def _address(text: str) -> str:
    if text:
        try:
            parse_address(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _resource_name(text: str) -> str:
    domain, sep, name = text.partition("/")
    if not (domain and sep and name):
        raise argparse.ArgumentTypeError(f"{text!r} is not an extended resource name")
    return text


def _dra_driver(text: str) -> str:
    # A DRA driver name is a DNS subdomain; an empty one would match every
    # entry an old kubelet lists without a driver.
    if not text or "/" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a DRA driver name")
    return text


def _path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="allocwatch",
        # `--interv` must not quietly mean --interval: a typo, or a flag
        # added later that shares the prefix, would change what runs.
        allow_abbrev=False,
        description="Publish nvml-mock memory readings that follow kubelet GPU allocation.",
    )
    p.add_argument(
        "--socket",
        type=_path,
        default=env("MOCK_NVML_PODRESOURCES_SOCKET") or DEFAULT_SOCKET,
        help="kubelet pod-resources socket "
        "(env MOCK_NVML_PODRESOURCES_SOCKET; default %(default)s)",
    )
    p.add_argument(
        "--driver-root",
        type=_path,
        action=GivenAction,
        default=DEFAULT_DRIVER_ROOT,
        help="nvml-mock driver root (default %(default)s); given, it beats "
        "MOCK_NVML_CONFIG and MOCK_NVML_OVERRIDES",
    )
    p.set_defaults(driver_root_given=False)
    p.add_argument(
        "--config",
        type=_path,
        help="nvml-mock profile (env MOCK_NVML_CONFIG; default <driver-root>/config/config.yaml)",
    )
    p.add_argument(
        "--overrides",
        type=_path,
        help="override file to publish into "
        "(env MOCK_NVML_OVERRIDES; default <driver-root>/config/overrides.yaml)",
    )
    p.add_argument(
        "--interval",
        type=_interval,
        default=DEFAULT_INTERVAL,
        help="poll interval: 500ms, 2s, 1m30s or seconds (default %(default)s)",
    )
    p.add_argument(
        "--used-fraction",
        type=_fraction,
        default="0.5",
        help="share of a GPU's usable memory one claim uses, in (0, 1] (default %(default)s)",
    )
    p.add_argument(
        "--resource-name",
        type=_resource_name,
        action="append",
        dest="resource_names",
        metavar="NAME",
        help="resource counted as a GPU claim; repeatable "
        f"(default {' and '.join(DEFAULT_RESOURCE_NAMES)})",
    )
    p.add_argument(
        "--dra-driver",
        type=_dra_driver,
        action="append",
        dest="dra_drivers",
        metavar="NAME",
        help="DRA driver whose allocated devices count as GPU claims; repeatable "
        f"(default {' and '.join(DEFAULT_DRA_DRIVERS)})",
    )
    p.add_argument(
        "--dial-timeout",
        type=_interval,
        default="10s",
        help="how long to wait for the socket at startup (default %(default)s)",
    )
    p.add_argument(
        "--metrics-address",
        type=_address,
        default=DEFAULT_METRICS_ADDRESS,
        help="serve /metrics, /healthz, /readyz here; empty disables (default %(default)s)",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    p.add_argument("--log-level", choices=LEVELS, default="info")
    p.add_argument(
        "--keep-readings-on-exit",
        action="store_true",
        help="leave the memory readings in place on exit instead of removing them",
    )
    p.add_argument(
        "--no-processes",
        dest="processes",
        action="store_false",
        help="never touch the devices' `processes` lists (by default each claim is "
        "published as an NVML process named <namespace>/<pod>/<container>)",
    )
    p.add_argument(
        "--no-activity",
        dest="activity",
        action="store_false",
        help="never touch the devices' utilization, power and temperature (by default they "
        "follow the claims, and a nvml-mock-ctl util|power|temp pin is left alone)",
    )
    p.add_argument(
        "--busy-utilization",
        type=_band,
        default=str(DEFAULT_BUSY),
        metavar="LO-HI",
        help="the utilization band one claim keeps its GPU in, in percent; 0 for allocated "
        "but not computing (default %(default)s)",
    )
    p.add_argument(
        "--declared-load",
        action="store_true",
        help="read the load pods declare in annotations (allocwatch.dev/gpu-memory, "
        "allocwatch.dev/gpu-utilization, run.ai/simulated-gpu-utilization) from the API "
        "server: the pods of the node named by NODE_NAME",
    )
    p.add_argument(
        "--kubeconfig",
        type=_path,
        help="with --declared-load: a kubeconfig to use instead of the in-cluster configuration",
    )
    p.add_argument("--once", action="store_true", help="poll and publish once, then exit")
    p.add_argument("--version", action="version", version=f"allocwatch {__version__}")
    return p
