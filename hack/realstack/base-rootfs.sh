#!/usr/bin/env bash
# The Debian base of the nvml-mock image, as a cached rootfs tarball; prints
# its path. It holds what deployments/nvml-mock/Dockerfile installs with apt:
#   - debootstrap minbase of bookworm with main and non-free;
#   - the packages setup.sh and stage-ib-tools.sh use (pciutils, the
#     InfiniBand tools and libraries, patchelf, which the image step removes);
#   - nvidia-smi 535 from Debian's non-free archive, the binary only, with
#     RPATH $ORIGIN/../lib64 as upstream sets it, so that it finds the mock
#     libnvidia-ml.so.1 beside itself in every mount of the driver root.
# Installing the nvidia-smi package would pull in the real libnvidia-ml1 and
# the driver alternatives; the binary needs only glibc and dlopens NVML.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

INCLUDE=pciutils,infiniband-diags,rdma-core,ibverbs-utils,ibverbs-providers,patchelf
COMPONENTS=main,non-free
NVIDIA_SMI=nvidia-smi

[ "$(id -u)" = 0 ] || die "run as root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing (apt-get install debootstrap)"
key=$(printf '%s\n' "$SUITE $COMPONENTS $INCLUDE $NVIDIA_SMI" "$(recipe_key "$0")" | sha256sum | cut -c1-12)
out=$CACHE/rootfs/$SUITE-nvml-mock-$key.tar
if [ -f "$out" ]; then echo "$out"; exit 0; fi

mirror=$(apt_mirror "$SUITE")
mkdir -p "$CACHE/rootfs" "$LOGDIR"
rootfs=$(mktemp -d "$CACHE/rootfs/build.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
log "debootstrap $SUITE ($COMPONENTS: $INCLUDE) from $mirror"
debootstrap --variant=minbase --components="$COMPONENTS" --include="$INCLUDE" \
  "$SUITE" "$rootfs" "$mirror" >"$LOGDIR/debootstrap-nvml-mock.log" 2>&1 \
  || { show_log debootstrap-nvml-mock; die "debootstrap failed"; }

log "nvidia-smi from $SUITE non-free"
chroot "$rootfs" apt-get update -qq
chroot "$rootfs" sh -euc "cd /tmp && apt-get download -qq ${NVIDIA_SMI} && dpkg-deb -x ${NVIDIA_SMI}_*.deb /tmp/smi"
smi_deb=$(basename "$rootfs"/tmp/"$NVIDIA_SMI"_*.deb)
install -m 0755 "$rootfs/tmp/smi/usr/lib/nvidia/current/nvidia-smi" "$rootfs/usr/local/bin/nvidia-smi"
mkdir -p "$rootfs/usr/share/doc/nvidia-smi"
cp "$rootfs/tmp/smi/usr/share/doc/nvidia-smi/copyright" "$rootfs/usr/share/doc/nvidia-smi/"
echo "$smi_deb" >"$rootfs/usr/share/doc/nvidia-smi/SOURCE"
# Single quotes on purpose: the loader resolves $ORIGIN, not this shell.
# shellcheck disable=SC2016
chroot "$rootfs" patchelf --set-rpath '$ORIGIN/../lib64' /usr/local/bin/nvidia-smi
mkdir -p "$rootfs/etc/libibverbs.d"

rm -rf "$rootfs/tmp/smi" "$rootfs"/tmp/*.deb "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin
rm -rf "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
log "base rootfs $out ($smi_deb)"
echo "$out"
