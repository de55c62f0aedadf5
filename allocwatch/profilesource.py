"""Keeps the profile's devices current across polls, logging each problem once."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from allocwatch.logs import shorten
from allocwatch.profile import Device, ProfileError, parse_profile
from allocwatch.sharedfile import FileTooLarge, read_regular_file
from allocwatch.shutdown import Interrupted, Stop

log = logging.getLogger(__name__)


def load_devices(path: str | os.PathLike[str]) -> list[Device]:
    """Read and parse a profile file. Raises OSError or ProfileError."""
    try:
        raw, _ = read_regular_file(Path(path))
    except FileTooLarge as exc:
        raise ProfileError(str(exc)) from None
    return parse_profile(raw.decode("utf-8"))


class ProfileSource:
    """Keeps the devices of a profile file current across polls.

    The file is re-read only when its inode, mtime or size changes. A missing
    file yields None (publish nothing); a malformed one keeps the last good
    devices, logs each distinct problem once, and recovers when fixed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.devices: list[Device] | None = None
        self.error: str | None = None
        self._identity: tuple[int, int, int, int] | None = None

    def refresh(self, stop: Stop | None = None) -> list[Device] | None:
        """The current devices, or None when there are none to publish for.

        Each problem is logged here, once, naming the file; `error` holds it.
        `stop` may cut the parse short (Interrupted); the file is read again next time.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._missing()
        except OSError as exc:  # e.g. a parent that is not a directory
            self._identity = None
            return self._unusable(f"profile {self.path}: {exc.strerror or exc}")
        identity = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if identity == self._identity:
            return self.devices
        self._identity = identity
        try:
            if stop is None:
                devices = load_devices(self.path)
            else:
                with stop.interruptible():
                    devices = load_devices(self.path)
        except Interrupted:
            self._identity = None
            raise
        except FileNotFoundError:  # removed since the stat
            return self._missing()
        except OSError as exc:
            # Try again next poll: fixing permissions changes neither mtime nor size.
            self._identity = None
            return self._unusable(f"profile {self.path}: {exc.strerror or exc}")
        except (UnicodeDecodeError, ProfileError) as exc:
            return self._unusable(f"profile {self.path}: {exc}")
        if devices != self.devices:
            log.info(
                "profile %s: %d devices (%s)",
                self.path,
                len(devices),
                ", ".join(
                    f"{d.index}={shorten(d.uuid) or '<no uuid>'}"
                    f"{'' if d.has_memory else ' (no memory)'}"
                    for d in devices
                ),
            )
        self.devices = devices
        self.error = None
        return devices

    def _missing(self) -> None:
        error = f"profile {self.path} is missing"
        if error != self.error:
            log.warning("%s; publishing nothing until it appears", error)
        self.devices = None
        self._identity = None
        self.error = error
        return None

    def _unusable(self, error: str) -> list[Device] | None:
        """Keep the last good devices, if any, and log a new problem once."""
        if error != self.error:
            if self.devices is None:
                log.error("%s; not publishing until it is fixed", error)
            else:
                log.error("%s; keeping the last good devices", error)
        self.error = error
        return self.devices
