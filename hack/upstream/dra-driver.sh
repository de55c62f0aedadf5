#!/usr/bin/env bash
# Build NVIDIA's DRA driver for GPUs at the pinned release (dra-driver.version)
# and print the output directory:
#   <cache>/upstream/dra-driver-<source>-<recipe>/
#     gpu-kubelet-plugin          built as upstream's Makefile builds it (cgo,
#                                 its link flags and version variables), from vendor/
#     kubelet-plugin-prestart.sh  the chart's init container script (hack/)
#     templates/                  what the plugin renders at run time
#     chart/                      deployments/helm/dra-driver-nvidia-gpu
#     LICENSE, SOURCE
# Only the GPU kubelet plugin is built: the real stack turns compute domains
# off, so the controller, the compute-domain plugin and daemon and the webhook
# never run.
#
# The source (source.sh): the tarball ../shared/upstream/<tarball> beside the
# repository ($ALLOCWATCH_DRA_TARBALL overrides it), checked against its
# sha256, with no network at all; without it, a shallow git clone of the
# pinned commit ($ALLOCWATCH_DRA_GIT overrides the URL). <source> is
# tar-<sha256> or git-<commit> and <recipe> hashes the pin, this script and
# source.sh, so a changed source or recipe builds afresh; a complete directory
# is reused as is. <cache> is $ALLOCWATCH_CACHE (hack/common.sh).
#
# Exit codes: 0 built (or cached); 1 anything failed (one line on stderr says what).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pin=$here/dra-driver.version
# shellcheck source=hack/common.sh
. "$here/../common.sh"
# shellcheck source=hack/upstream/source.sh
. "$here/source.sh"
cache=$(allocwatch_cache_dir)
recipe=$(cat "$pin" "$here/dra-driver.sh" "$here/source.sh" | sha256sum | cut -c1-8)
version=$(pin_value "$pin" version)
commit=$(pin_value "$pin" commit)

locate_source "$pin" ALLOCWATCH_DRA_TARBALL
out=$cache/upstream/dra-driver-$SOURCE_KEY-$recipe
# SOURCE is written last, and a build is moved into place whole.
if [ -f "$out/SOURCE" ]; then
  echo "$out"
  exit 0
fi

# Looked up only once a build is needed: a complete cache needs no Go.
go=${GO:-$(find_go || true)}
if [ -z "$go" ] || ! "$go" version >/dev/null 2>&1; then
  die "no working Go toolchain (${go:-none found}; put go on PATH or set GO=...)"
fi
export GOCACHE=$cache/go/build
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
# -trimpath: each build unpacks into a new temporary directory, and only
# path-free builds can reuse GOCACHE across them.
export GOFLAGS="-mod=vendor -buildvcs=false -trimpath"
export GOPROXY=off
export CGO_ENABLED=1
# upstream's Makefile: go-nvml resolves NVML's symbols when it dlopens the library
export CGO_LDFLAGS_ALLOW='-Wl,--unresolved-symbols=ignore-in-object-files'

mkdir -p "$cache/upstream"
work=$(mktemp -d)
stage=$(mktemp -d "$cache/upstream/.dra-driver-XXXXXX")
trap 'rm -rf "$work" "$stage"' EXIT
src=$work/src
mkdir "$src"
unpack_source "$pin" "$src" "${ALLOCWATCH_DRA_GIT:-}"

# cgo's deprecation warnings from go-nvml's header run long: they go to a log,
# whose tail is shown when the build fails.
log "go build ./cmd/gpu-kubelet-plugin ($version)"
info=sigs.k8s.io/dra-driver-nvidia-gpu/internal/info
if ! (cd "$src" && "$go" build -o "$stage/gpu-kubelet-plugin" \
  -ldflags "-s -w -X $info.gitCommit=$commit -X $info.version=$version" \
  ./cmd/gpu-kubelet-plugin) >"$work/build.log" 2>&1; then
  tail -n 60 "$work/build.log" >&2
  die "go build ./cmd/gpu-kubelet-plugin failed with $("$go" env GOVERSION) (the log's tail is above)"
fi
install -m 0755 "$src/hack/kubelet-plugin-prestart.sh" "$stage/kubelet-plugin-prestart.sh"
cp -a "$src/templates" "$stage/templates"
cp -a "$src/deployments/helm/dra-driver-nvidia-gpu" "$stage/chart"
cp "$src/LICENSE" "$stage/LICENSE"
echo "$SOURCE_ORIGIN" >"$stage/SOURCE"

rm -rf "$out"
mv "$stage" "$out"
chmod 0755 "$out"
trap 'rm -rf "$work"' EXIT
echo "$out"
