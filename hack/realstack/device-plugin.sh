#!/usr/bin/env bash
# NVIDIA's k8s-device-plugin, built from the Go module proxy (device-plugin/
# go.mod pins the version) like the cluster's Kubernetes and etcd, its image,
# and the toolkit's nvidia-cdi-hook (cdi-hook/go.mod), which nvml-mock's CDI
# spec runs on the node:
#
#   device-plugin.sh [--import]
#
# Prints DEVICE_PLUGIN_BIN=<binary>, NVIDIA_CDI_HOOK_BIN=<binary>,
# DEVICE_PLUGIN_IMAGE=<ref> and
# DEVICE_PLUGIN_IMAGE_TAR=<tarball>. The binary is cached under
# $CACHE/bin/nvidia-device-plugin-<version>-<go>-<key>/ (<key> hashes go.mod,
# go.sum, this script and the Go settings); the image under $CACHE/images.
# --import loads the image into containerd's k8s.io namespace.
#
# cgo stays on: go-nvml dlopens libnvidia-ml.so.1. So the image carries the
# binary and the shared-library closure of it and of the mock NVML library it
# will load (glibc, taken from this Debian host) rather than a whole Debian
# rootfs; upstream's image is a distroless one in the same spirit.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

import=false
[ "${1:-}" = --import ] && import=true
MODDIR=$REALSTACK_DIR/device-plugin
PKG=github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin
HOOK_MODDIR=$REALSTACK_DIR/cdi-hook
HOOK_PKG=github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook
VERSION=$(awk '$1 == "github.com/NVIDIA/k8s-device-plugin" {print $2}' "$MODDIR/go.mod")
[ -n "$VERSION" ] || die "no github.com/NVIDIA/k8s-device-plugin requirement in $MODDIR/go.mod"

realstack_go_env
export GOFLAGS=-mod=mod
key=$(printf '%s\n' "$GOFLAGS $CGO_ENABLED" "$(recipe_key "$MODDIR/go.mod" "$MODDIR/go.sum" "$HOOK_MODDIR/go.mod" "$HOOK_MODDIR/go.sum" "$0")" | sha256sum | cut -c1-8)
bindir=$CACHE/bin/nvidia-device-plugin-$VERSION-$GO_VERSION-$key
bin=$bindir/nvidia-device-plugin
if [ ! -x "$bin" ] || [ ! -x "$bindir/nvidia-cdi-hook" ]; then
  log "go build $PKG@$VERSION"
  mkdir -p "$CACHE/bin"
  tmp=$(mktemp -d "$CACHE/bin/.nvidia-device-plugin.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # The link flags of upstream's Makefile: go-nvml resolves NVML's symbols
  # when it dlopens the library, not at link time.
  (cd "$MODDIR" && "$GO" build -trimpath -o "$tmp/nvidia-device-plugin" -ldflags "-s -w \
    '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files' \
    -X github.com/NVIDIA/k8s-device-plugin/internal/info.version=$VERSION" "$PKG")
  # nvml-mock's CDI spec runs it as a createContainer hook; it has its own module.
  HOOK_VERSION=$(awk '$1 == "github.com/NVIDIA/nvidia-container-toolkit" {print $2}' "$HOOK_MODDIR/go.mod")
  (cd "$HOOK_MODDIR" && "$GO" build -trimpath -o "$tmp/nvidia-cdi-hook" -ldflags "-s -w \
    -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=$HOOK_VERSION" "$HOOK_PKG")
  chmod 0755 "$tmp"
  rm -rf "$bindir"
  mv "$tmp" "$bindir"
  trap - EXIT
fi

# The closure of the binary and of the mock library (hack/upstream/build.sh
# --image builds it).
upstream=$("$REPO_ROOT/hack/upstream/build.sh" --image) || die "hack/upstream/build.sh --image failed"
mapfile -t libs < <(ldd "$bin" "$upstream"/lib/libnvidia-ml.so.1 |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(0x/ {print $1}' | sort -u)
key=$( { sha256sum <"$bin"; for l in "${libs[@]}"; do echo "$l"; sha256sum <"$l"; done
         recipe_key "$0" "$MKIMAGE"; } | sha256sum | cut -c1-12)
ref=localhost/k8s-device-plugin:$VERSION-$key
tarball=$CACHE/images/k8s-device-plugin-$VERSION-$key.tar
if [ ! -f "$tarball" ]; then
  mkdir -p "$CACHE/images"
  rootfs=$(mktemp -d "$CACHE/images/device-plugin.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  mkdir -p "$rootfs/usr/bin" "$rootfs/tmp" "$rootfs/etc"
  chmod 1777 "$rootfs/tmp"
  install -m 0755 "$bin" "$rootfs/usr/bin/nvidia-device-plugin"
  for l in "${libs[@]}"; do
    mkdir -p "$rootfs$(dirname "$l")"
    cp -L "$l" "$rootfs$l"
  done
  # Debian's loader path is /lib64/ld-linux-x86-64.so.2 through the /lib64
  # link; keep the usr-merged layout so both spellings resolve.
  for d in lib lib64; do
    if [ -d "$rootfs/$d" ] && [ ! -L "$rootfs/$d" ]; then
      mkdir -p "$rootfs/usr/$d"; cp -a "$rootfs/$d/." "$rootfs/usr/$d/"; rm -rf "${rootfs:?}/$d"
    fi
    [ -d "$rootfs/usr/$d" ] && ln -s "usr/$d" "$rootfs/$d"
  done
  echo 'root:x:0:0:root:/root:/sbin/nologin' >"$rootfs/etc/passwd"
  echo 'root:x:0:' >"$rootfs/etc/group"
  pack_image "$rootfs" "$ref" "$tarball" --entrypoint '["/usr/bin/nvidia-device-plugin"]'
fi
if $import; then import_image "$tarball" "$ref"; fi
echo "DEVICE_PLUGIN_BIN=$bin"
echo "NVIDIA_CDI_HOOK_BIN=$bindir/nvidia-cdi-hook"
echo "DEVICE_PLUGIN_IMAGE=$ref"
echo "DEVICE_PLUGIN_IMAGE_TAR=$tarball"
