"""The fake kubelet moved to the top-level `fakekubelet` package (shared with bench/).

These names remain here only for tests/interop, which still imports them from here.
"""

from fakekubelet import FakeKubelet, build_response, gpu_pod

__all__ = ["FakeKubelet", "build_response", "gpu_pod"]
