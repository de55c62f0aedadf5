"""A fake NVIDIA DRA kubelet plugin for the end-to-end tests.

It registers the driver (`gpu.nvidia.com` by default) with the kubelet through
the plugin-registration socket, publishes a ResourceSlice of the GPUs of an
nvml-mock profile (`gpu-<minor>` devices with a `uuid` attribute) and a
DeviceClass selecting the driver, and answers `NodePrepareResources` with the
pool and device names of each claim's allocation and no CDI ids (the
container runtimes we test on have no CDI). Run it with `python -m e2e.fakedra`
from a directory holding the `e2e` package.
"""
