"""allocwatch: makes nvml-mock memory.used_bytes follow Kubernetes GPU allocation."""

import os

# grpc reads this once, on its first import, so it is set before any module
# imports grpc. With iomgr's client endpoint the thread blocked in List does its
# own socket I/O; not the EventEngine client, which hands every read to its
# thread pool and costs more CPU per poll (`make bench`). A GRPC_EXPERIMENTS
# set by the user, even empty, is left alone.
os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client")


def __getattr__(name: str) -> str:
    # Looked up on first use, not at import: importing importlib.metadata is
    # slow, and until it is done `allocwatch` cannot yet catch a stop signal.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("allocwatch")
    except PackageNotFoundError:  # running from a source tree without an install
        found = "0.1.0"
    globals()["__version__"] = found
    return found
