#!/usr/bin/env bash
# NVIDIA's DRA driver for GPUs as an image, made the way device-plugin.sh makes
# the device plugin's:
#   - gpu-kubelet-plugin, its chart's init script and templates, and the chart
#     (hack/upstream/dra-driver.sh builds them from the pinned tarball);
#   - the toolkit's nvidia-cdi-hook (dra-driver/go.mod, the Go module proxy),
#     at /usr/bin/nvidia-cdi-hook, where the plugin copies it onto the node from;
#   - what the chart's commands run: bash (the containers' `bash -c`, the init
#     script), busybox-static's applets for the init script's find, ls, date,
#     sleep and env, and this Debian host's glibc (all of libc6's libraries:
#     the init script runs the driver root's nvidia-smi, which loads the mock
#     NVML library, and both need more of glibc than the plugin does).
# Upstream's image is distroless/cc:debug (glibc and busybox) with a static
# bash; this is the same set from Debian.
#
#   dra-driver.sh [--import]
#
# Prints DRA_DRIVER_IMAGE=<ref>, DRA_DRIVER_IMAGE_TAR=<tarball>,
# DRA_DRIVER_CHART=<chart dir>, DRA_PLUGIN_BIN=<gpu-kubelet-plugin> and
# DRA_CDI_HOOK_BIN=<nvidia-cdi-hook>. The hook is cached under
# $CACHE/bin/nvidia-cdi-hook-<version>-<go>-<key>/ (<key> hashes go.mod,
# go.sum, this script and the Go settings), the image under $CACHE/images.
# --import loads the image into containerd's k8s.io namespace.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

import=false
[ "${1:-}" = --import ] && import=true
MODDIR=$REALSTACK_DIR/dra-driver
HOOK_PKG=github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook
HOOK_VERSION=$(awk '$1 == "github.com/NVIDIA/nvidia-container-toolkit" {print $2}' "$MODDIR/go.mod")
[ -n "$HOOK_VERSION" ] || die "no github.com/NVIDIA/nvidia-container-toolkit requirement in $MODDIR/go.mod"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die "no $BUSYBOX (apt-get install busybox-static)"

upstream=$("$REPO_ROOT/hack/upstream/dra-driver.sh") || die "hack/upstream/dra-driver.sh failed"
version=$(sed -n 's/^version=//p' "$REPO_ROOT/hack/upstream/dra-driver.version")

realstack_go_env
export GOFLAGS=-mod=mod
key=$(printf '%s\n' "$GOFLAGS $CGO_ENABLED" "$(recipe_key "$MODDIR/go.mod" "$MODDIR/go.sum" "$0")" | sha256sum | cut -c1-8)
hookdir=$CACHE/bin/nvidia-cdi-hook-$HOOK_VERSION-$GO_VERSION-$key
hook=$hookdir/nvidia-cdi-hook
if [ ! -x "$hook" ]; then
  log "go build $HOOK_PKG@$HOOK_VERSION"
  mkdir -p "$CACHE/bin"
  tmp=$(mktemp -d "$CACHE/bin/.nvidia-cdi-hook.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$MODDIR" && "$GO" build -trimpath -o "$tmp/nvidia-cdi-hook" -ldflags "-s -w \
    -X github.com/NVIDIA/nvidia-container-toolkit/internal/info.version=$HOOK_VERSION" "$HOOK_PKG")
  chmod 0755 "$tmp"
  rm -rf "$hookdir"
  mv "$tmp" "$hookdir"
  trap - EXIT
fi

bash_bin=$(command -v bash)
mapfile -t libs < <({ shared_libs "$upstream/gpu-kubelet-plugin" "$bash_bin"
  dpkg -L libc6 | grep -E '^/lib(64)?/(x86_64-linux-gnu/)?[^/]+\.so[.0-9]*$'; } | sort -u)
key=$( { for f in "$upstream/gpu-kubelet-plugin" "$hook" "$BUSYBOX" "$bash_bin" "${libs[@]}"; do
           echo "$f"; sha256sum <"$f"; done
         sha256sum <"$upstream/kubelet-plugin-prestart.sh"
         tar -C "$upstream" -c --sort=name --mtime=@0 --owner=0 --group=0 templates | sha256sum
         recipe_key "$0" "$MKIMAGE"; } | sha256sum | cut -c1-12)
ref=localhost/dra-driver-nvidia-gpu:$version-$key
tarball=$CACHE/images/dra-driver-nvidia-gpu-$version-$key.tar
if [ ! -f "$tarball" ]; then
  mkdir -p "$CACHE/images"
  rootfs=$(mktemp -d "$CACHE/images/dra-driver.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  mkdir -p "$rootfs/usr/bin" "$rootfs/tmp" "$rootfs/etc" "$rootfs/root"
  chmod 1777 "$rootfs/tmp"
  install -m 0755 "$upstream/gpu-kubelet-plugin" "$rootfs/usr/bin/gpu-kubelet-plugin"
  install -m 0755 "$hook" "$rootfs/usr/bin/nvidia-cdi-hook"
  # The init script's driver check runs the driver root's `nvidia-smi --version`,
  # an option nvidia-smi gained after 535, the Debian one nvml-mock's image
  # has (README.md): it asks for `-L` instead, which loads the same NVML.
  # shellcheck disable=SC2016  # the script's own ${NV_PATH}, not ours
  sed 's|"${NV_PATH}" --version$|"${NV_PATH}" -L|' "$upstream/kubelet-plugin-prestart.sh" >"$rootfs/prestart"
  [ "$(grep -c '"${NV_PATH}" -L$' "$rootfs/prestart")" = 1 ] ||
    die "kubelet-plugin-prestart.sh no longer runs \"\${NV_PATH}\" --version once: revisit the patch"
  install -m 0755 "$rootfs/prestart" "$rootfs/usr/bin/kubelet-plugin-prestart.sh"
  rm "$rootfs/prestart"
  install -m 0755 "$bash_bin" "$rootfs/usr/bin/bash"
  install -m 0755 "$BUSYBOX" "$rootfs/usr/bin/busybox"
  for applet in $("$BUSYBOX" --list); do
    [ -e "$rootfs/usr/bin/$applet" ] || ln -s busybox "$rootfs/usr/bin/$applet"
  done
  ln -s usr/bin "$rootfs/bin"
  ln -s usr/bin "$rootfs/sbin"
  add_host_libs "$rootfs" "${libs[@]}"
  cp -a "$upstream/templates" "$rootfs/templates"
  cp "$upstream/LICENSE" "$rootfs/LICENSE"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
  echo 'root:x:0:' >"$rootfs/etc/group"
  pack_image "$rootfs" "$ref" "$tarball"
fi
if $import; then import_image "$tarball" "$ref"; fi
echo "DRA_DRIVER_IMAGE=$ref"
echo "DRA_DRIVER_IMAGE_TAR=$tarball"
echo "DRA_DRIVER_CHART=$upstream/chart"
echo "DRA_PLUGIN_BIN=$upstream/gpu-kubelet-plugin"
echo "DRA_CDI_HOOK_BIN=$hook"
