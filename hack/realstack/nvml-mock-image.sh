#!/usr/bin/env bash
# The nvml-mock image, made as deployments/nvml-mock/Dockerfile makes it but
# offline and without Docker: the Debian base (base-rootfs.sh), the upstream
# build (hack/upstream/build.sh --image) at the Dockerfile's paths,
# stage-ib-tools.sh run in the rootfs, patchelf removed again, packed by the
# cluster's mkimage.py.
#
#   nvml-mock-image.sh [--import]
#
# Prints NVML_MOCK_IMAGE=<ref>, NVML_MOCK_IMAGE_TAR=<tarball> and
# NVML_MOCK_CHART=<chart dir>. The tarball is cached under $CACHE/images,
# named by a key over the base, the upstream build, kubectl and this recipe.
# --import loads it into containerd's k8s.io namespace.
#
# kubectl (setup.sh labels the node with it, the Dockerfile downloads it) is
# the cluster's own static build: $KUBECTL, else the one hack/cluster/build.sh
# builds and caches for the local cluster (never another kubectl on PATH,
# which need not be static).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

import=false
[ "${1:-}" = --import ] && import=true
[ "$(id -u)" = 0 ] || die "run as root"

base_tar=$("$REALSTACK_DIR/base-rootfs.sh") || die "base-rootfs.sh failed"
upstream=$("$REPO_ROOT/hack/upstream/build.sh" --image) || die "hack/upstream/build.sh --image failed"
if [ -z "${KUBECTL:-}" ]; then
  "$REPO_ROOT/hack/cluster/build.sh" >&2 || die "hack/cluster/build.sh failed"
  bin_dirs
  KUBECTL=$K8S_BIN/kubectl
fi
[ -x "$KUBECTL" ] || die "no kubectl at $KUBECTL"
kubectl_sum=$(sha256sum <"$KUBECTL" | cut -c1-64)
key=$(printf '%s\n' "$(basename "$base_tar")" "$(basename "$upstream")" "$kubectl_sum" \
  "$(recipe_key "$0" "$MKIMAGE")" | sha256sum | cut -c1-12)
ref=localhost/nvml-mock:$UPSTREAM_COMMIT-$key
tarball=$CACHE/images/nvml-mock-$UPSTREAM_COMMIT-$key.tar

if [ ! -f "$tarball" ]; then
  mkdir -p "$CACHE/images"
  rootfs=$(mktemp -d "$CACHE/images/nvml-mock.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  tar -C "$rootfs" -xf "$base_tar"
  cp -a "$upstream"/lib/. "$rootfs/usr/local/lib/"
  cp -a "$upstream"/bin/. "$rootfs/usr/local/bin/"
  cp -a "$upstream"/usr-bin/. "$rootfs/usr/bin/"
  install -m 0755 "$upstream/scripts/stage-ib-tools.sh" "$rootfs/usr/local/bin/stage-ib-tools.sh"
  install -m 0755 "$KUBECTL" "$rootfs/usr/local/bin/kubectl"
  chroot "$rootfs" sh /usr/local/bin/stage-ib-tools.sh >&2
  chroot "$rootfs" dpkg --purge patchelf >/dev/null
  cp -a "$upstream/scripts" "$rootfs/scripts"
  mkdir -p "$rootfs/usr/share/doc/nvml-mock"
  cp "$upstream/LICENSE" "$rootfs/usr/share/doc/nvml-mock/LICENSE"
  pack_image "$rootfs" "$ref" "$tarball" --cmd '["/scripts/entrypoint.sh"]'
fi
if $import; then import_image "$tarball" "$ref"; fi
echo "NVML_MOCK_IMAGE=$ref"
echo "NVML_MOCK_IMAGE_TAR=$tarball"
echo "NVML_MOCK_CHART=$upstream/chart"
