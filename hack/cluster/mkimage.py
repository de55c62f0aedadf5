#!/usr/bin/env python3
"""Pack a directory into a one-layer image tarball in `docker save` format.

    mkimage.py ROOTFS_DIR IMAGE_REF OUT.tar [--entrypoint JSON] [--cmd JSON]
               [--env NAME=VALUE]... [--stop-signal SIGNAL]

The tarball loads with `ctr -n k8s.io images import` or `docker load`; no
Docker daemon or registry is involved. The layer is reproducible: entries are
sorted, owned by root (0:0), and dated at the epoch.
"""

import argparse
import hashlib
import io
import json
import os
import stat
import sys
import tarfile

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def layer_tar(rootfs: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = []
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in dirnames + sorted(filenames):
                entries.append(os.path.join(dirpath, name))
        for path in sorted(entries, key=lambda p: os.path.relpath(p, rootfs)):
            arcname = os.path.relpath(path, rootfs)
            info = tar.gettarinfo(path, arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rootfs")
    ap.add_argument("ref", help="image reference, e.g. registry.k8s.io/pause:3.9")
    ap.add_argument("out")
    ap.add_argument("--entrypoint", type=json.loads, default=None)
    ap.add_argument("--cmd", type=json.loads, default=None)
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE, after PATH")
    ap.add_argument("--stop-signal", default=None)
    args = ap.parse_args()
    if not stat.S_ISDIR(os.stat(args.rootfs).st_mode):
        ap.error(f"{args.rootfs} is not a directory")

    layer = layer_tar(args.rootfs)
    diff_id = hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": [PATH_ENV, *args.env], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "mkimage.py"}],
    }
    if args.entrypoint is not None:
        config["config"]["Entrypoint"] = args.entrypoint
    if args.cmd is not None:
        config["config"]["Cmd"] = args.cmd
    if args.stop_signal is not None:
        config["config"]["StopSignal"] = args.stop_signal
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = f"{diff_id}/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [args.ref], "Layers": [layer_name]}]

    tmp = args.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as out:
        for name, data in (
            (config_name, config_bytes),
            (layer_name, layer),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(data))
    os.replace(tmp, args.out)
    print(f"{args.ref} -> {args.out} ({len(layer) // 1024} KiB layer)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
