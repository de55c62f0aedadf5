# Shared settings for the hack/realstack scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034
#
# The real stack's pieces (NVIDIA's nvml-mock image, built from the pinned
# upstream tarball, and NVIDIA's k8s-device-plugin, built from the Go module
# proxy) are built offline into the same cache as the cluster's binaries and
# node images, each under a key over its sources and its recipe.

REALSTACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The cluster's CACHE, hack/common.sh (log, die, find_go) and the image packer are reused.
# shellcheck source=hack/cluster/lib.sh
. "$REALSTACK_DIR/../cluster/lib.sh"
MKIMAGE=$CLUSTER_DIR/mkimage.py

# The pinned upstream commit, abbreviated, as image tags name it (the pin
# itself, its tarball and their checks live in hack/upstream/).
UPSTREAM_COMMIT=$(sed -n 's/^commit=//p' "$REPO_ROOT/hack/upstream/VERSION" | cut -c1-8)
SUITE=bookworm

# recipe_key FILE...: a short hash of the files that make up a recipe.
recipe_key() { cat "$@" | sha256sum | cut -c1-12; }

# pack_image ROOTFS REF TARBALL MKIMAGE-FLAG...: pack a rootfs directory into
# an image tarball, then remove the directory (and the caller's EXIT trap,
# which was there to remove it).
pack_image() {
  python3 "$MKIMAGE" "$1" "$2" "$3" "${@:4}"
  rm -rf "$1"
  trap - EXIT
}

# import_image TARBALL REF: load an image tarball into the node's containerd
# (k8s.io namespace), where pods use it with imagePullPolicy Never.
import_image() {
  ctr -n k8s.io images import "$1" >/dev/null
  log "imported $2"
}

# realstack_go_env: Go builds share the cluster's module and build caches;
# cgo stays on, since the device plugin and the mock libraries use it.
realstack_go_env() {
  GO=$(find_go) || die "no Go toolchain found (need go >= 1.26 on PATH or in /usr/local/go)"
  export GOTOOLCHAIN=local CGO_ENABLED=1
  export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOPATH=$CACHE/gopath
  GO_VERSION=$("$GO" env GOVERSION)
}

# add_host_libs ROOTFS LIB...: copy this host's shared libraries into an image
# rootfs at their paths, kept usr-merged as Debian lays them out (ldd names
# /lib/x86_64-linux-gnu/... and the loader /lib64/ld-linux-x86-64.so.2; both
# spellings must resolve).
add_host_libs() {
  local rootfs=$1 lib d
  shift
  for lib in "$@"; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
  for d in lib lib64; do
    if [ -d "$rootfs/$d" ] && [ ! -L "$rootfs/$d" ]; then
      mkdir -p "$rootfs/usr/$d"; cp -a "$rootfs/$d/." "$rootfs/usr/$d/"; rm -rf "${rootfs:?}/$d"
    fi
    [ ! -d "$rootfs/usr/$d" ] || [ -e "$rootfs/$d" ] || ln -s "usr/$d" "$rootfs/$d"
  done
}

# shared_libs FILE...: the host libraries FILE... load (ldd), one path a line.
shared_libs() {
  ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $2 ~ /^\(0x/ {print $1}' | sort -u
}
