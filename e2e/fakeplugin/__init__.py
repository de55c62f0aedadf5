"""A fake NVIDIA device plugin for the end-to-end tests.

It advertises the GPUs of an nvml-mock profile to the kubelet as
`nvidia.com/gpu` (or another resource name), optionally time-sliced into
`<uuid>::<k>` replicas, and answers `Allocate` with `NVIDIA_VISIBLE_DEVICES`
only. Run it with `python -m fakeplugin`. The package imports only itself and
`allocwatch`, so it can be copied onto any PYTHONPATH next to the watcher.
"""
