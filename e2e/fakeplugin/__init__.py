"""A fake NVIDIA device plugin for the end-to-end tests.

It advertises the GPUs of an nvml-mock profile to the kubelet as
`nvidia.com/gpu` (or another resource name), optionally time-sliced into
`<uuid>::<k>` replicas, and answers `Allocate` with `NVIDIA_VISIBLE_DEVICES`
only. Run it with `python -m fakeplugin`. The package imports only itself,
`allocwatch`, and `e2e.kubeletplugin` (what it shares with the fake DRA
plugin); its image puts the `e2e` package beside it.
"""
