"""The `allocwatch` command: wiring the parts together, the startup checks and the exit codes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from allocwatch import __version__
from allocwatch.durations import format_duration
from allocwatch.flags import KUBELET_SHARE_INTERVAL, build_parser
from allocwatch.health import HealthServer
from allocwatch.kubeclient import ConfigError
from allocwatch.logs import configure
from allocwatch.metrics import Metrics, PollOutcome
from allocwatch.podresources import (
    DEFAULT_DRA_DRIVERS,
    DEFAULT_RESOURCE_NAMES,
    PodResourcesClient,
    why_unreachable,
)
from allocwatch.podwatch import PodWatch
from allocwatch.profilesource import ProfileSource
from allocwatch.publisher import OverridesPublisher
from allocwatch.shutdown import Interrupted, Shutdown
from allocwatch.watch import Watcher

log = logging.getLogger("allocwatch")

LIST_TIMEOUT = 5.0
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
# After a stop signal: the readings could not be removed in time and stay in
# the file (a held lock, or a file changed and too slow to read again).
EXIT_READINGS_LEFT = 3


def file_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """The profile and override paths: a flag, else its env var, else under the driver root.

    Flags typed for this run beat the environment, which may be set for the
    whole container or shell: an explicit --driver-root beats both env vars,
    and saying so once is better than quietly using another file.
    """
    root = Path(args.driver_root)
    paths = []
    for given, env_name, leaf in (
        (args.config, "MOCK_NVML_CONFIG", "config.yaml"),
        (args.overrides, "MOCK_NVML_OVERRIDES", "overrides.yaml"),
    ):
        from_env = os.environ.get(env_name)
        if given:
            paths.append(Path(given))
        elif from_env and not args.driver_root_given:
            paths.append(Path(from_env))
        else:
            if from_env:
                log.warning("%s=%s ignored: --driver-root %s was given", env_name, from_env, root)
            paths.append(root / "config" / leaf)
    return paths[0], paths[1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    node = os.environ.get("NODE_NAME", "")
    if args.declared_load and not node:
        parser.error("--declared-load: NODE_NAME is not set (the node whose pods to watch)")
    configure(args.log_format, args.log_level)
    profile, overrides = file_paths(args)
    resource_names = tuple(args.resource_names or DEFAULT_RESOURCE_NAMES)
    dra_drivers = tuple(args.dra_drivers or DEFAULT_DRA_DRIVERS)

    shutdown = Shutdown()
    shutdown.install()
    client = PodResourcesClient(
        args.socket,
        resource_names,
        call_timeout=LIST_TIMEOUT,
        shutdown=shutdown,
        dra_drivers=dra_drivers,
    )
    metrics = Metrics()
    declared = None
    if args.declared_load:
        declared = PodWatch(
            node,
            kubeconfig=args.kubeconfig,
            on_rejected=lambda annotation: metrics.declared_load_rejected.labels(annotation).inc(),
        )
    watcher = Watcher(
        client,
        ProfileSource(profile),
        OverridesPublisher(overrides, lock_timeout=min(5.0, max(1.0, args.interval))),
        fraction=args.used_fraction,
        interval=args.interval,
        metrics=metrics,
        processes=args.processes,
        activity=args.activity,
        busy=args.busy_utilization,
        declared=declared,
    )

    server = None
    if args.metrics_address and not args.once:
        try:
            server = HealthServer(args.metrics_address, metrics, watcher.ready)
        except OSError as exc:
            log.error("--metrics-address %s: %s", args.metrics_address, exc)
            return EXIT_FAILURE
        server.start()

    try:
        if declared is not None:
            try:
                declared.start()  # in the background: the kubelet's claims never wait for it
            except ConfigError as exc:
                log.error("--declared-load: %s", exc)
                return EXIT_USAGE
        if not client.wait_ready(args.dial_timeout):
            if shutdown.is_set():
                return EXIT_OK
            log.error(
                "--socket %s: kubelet pod-resources socket not reachable within %s: %s",
                args.socket,
                format_duration(args.dial_timeout),
                why_unreachable(args.socket),
            )
            return EXIT_FAILURE
        if args.interval < KUBELET_SHARE_INTERVAL:
            log.warning(
                "--interval %s: %.0f List calls a second, of the kubelet's 100 a second "
                "for every pod-resources client on the node",
                format_duration(args.interval),
                1 / args.interval,
            )
        log.info(
            "allocwatch %s: polling %s every %s (resources %s, DRA drivers %s, fraction %g, "
            "busy %s) -> %s",
            __version__,
            args.socket,
            format_duration(args.interval),
            ", ".join(resource_names),
            ", ".join(dra_drivers),
            args.used_fraction,
            args.busy_utilization if args.activity else "off",
            overrides,
        )
        if server is not None:
            log.info("serving /metrics, /healthz, /readyz on port %d", server.port)
        if args.once:
            try:
                outcome = watcher.poll(shutdown)
            except Interrupted:
                return EXIT_OK
            if shutdown.is_set():  # a signal: not a failure, even if it cut the poll short
                return EXIT_OK
            return EXIT_OK if outcome == PollOutcome.OK else EXIT_FAILURE
        removed = True
        try:
            # Interrupted escapes only from a List or a parse; stop is set then.
            with contextlib.suppress(Interrupted):
                watcher.run(shutdown)
        finally:  # after a crash too: never leave a reading nobody updates
            if not args.keep_readings_on_exit:
                removed = watcher.remove_readings(timeout=shutdown.time_to_remove_readings())
        return EXIT_OK if removed else EXIT_READINGS_LEFT
    finally:
        client.close()
        if declared is not None:
            declared.stop(timeout=0.2)  # a daemon thread: the exit need not wait for it
        if server is not None:
            server.stop()
