"""What the real stack runs: nvml-mock's image and chart, NVIDIA's device plugin image,
allocwatch's image, and for its DRA variant NVIDIA's DRA driver's image and chart.
`make cluster-images` records them in the local cluster's images.env; another
cluster gives them in the environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .providers import ProviderUnavailable


@dataclass(frozen=True)
class RealImages:
    nvml_mock: str
    nvml_mock_chart: Path
    device_plugin: str
    allocwatch: str

    @classmethod
    def from_env(cls, env: dict[str, str], source: str) -> RealImages:
        keys = ("NVML_MOCK_IMAGE", "NVML_MOCK_CHART", "DEVICE_PLUGIN_IMAGE", "ALLOCWATCH_IMAGE")
        missing = [k for k in keys if not env.get(k)]
        if missing:
            raise ProviderUnavailable(f"{source}: {', '.join(missing)} not set")
        return cls(
            env["NVML_MOCK_IMAGE"],
            Path(env["NVML_MOCK_CHART"]),
            env["DEVICE_PLUGIN_IMAGE"],
            env["ALLOCWATCH_IMAGE"],
        )


@dataclass(frozen=True)
class DraDriverImages:
    """NVIDIA's DRA driver for GPUs: its image and its chart (the DRA variant)."""

    image: str
    chart: Path

    @classmethod
    def from_env(cls, env: dict[str, str], source: str) -> DraDriverImages:
        keys = ("DRA_DRIVER_IMAGE", "DRA_DRIVER_CHART")
        missing = [k for k in keys if not env.get(k)]
        if missing:
            raise ProviderUnavailable(f"{source}: {', '.join(missing)} not set")
        return cls(env["DRA_DRIVER_IMAGE"], Path(env["DRA_DRIVER_CHART"]))
