"""A fake plugin's process: option types, logging, signals, waiting for the profile."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TypeVar

T = TypeVar("T")


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than zero")
    return value


def configure_logging(level: str) -> None:
    """UTC timestamps to stderr, as the watcher logs."""
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s.%(msecs)03dZ %(levelname)s %(message)s",
        datefmt="%Y-%m-%dT%H:%M:%S",
    )
    logging.Formatter.converter = time.gmtime


def stop_on_signals(log: logging.Logger) -> threading.Event:
    """An event that SIGTERM and SIGINT set."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def wait_for_profile(
    path: Path,
    load: Callable[[Path], T],
    errors: tuple[type[Exception], ...],
    stop: threading.Event,
    poll: float,
    log: logging.Logger,
) -> T | None:
    """`load(path)`, retried while it raises one of `errors`; None once `stop` is set.

    Each new error is logged once, so a profile that stays missing does not
    flood the log.
    """
    last_error = ""
    while not stop.is_set():
        try:
            return load(path)
        except errors as exc:
            error = f"profile {path}: {exc}"
        if error != last_error:
            log.warning("%s; waiting", error)
            last_error = error
        stop.wait(poll)
    return None
