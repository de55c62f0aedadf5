"""allocwatch: makes nvml-mock memory.used_bytes follow Kubernetes GPU allocation."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("allocwatch")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.1.0"
