"""Which profile and override file to use: flags, then env vars, then the driver root."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

log = logging.getLogger("allocwatch")


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
