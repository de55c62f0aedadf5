#!/usr/bin/env bash
# Build the upstream nvml-mock code at the pinned commit (hack/upstream/VERSION)
# and print the output directory. The one place that checks, unpacks and
# builds the pinned source:
#
#   build.sh          the tools interop and bench-compare run:
#     <cache>/upstream/<source>-<recipe>/nvml-mock-ctl
#     <cache>/upstream/<source>-<recipe>/libnvidia-ml.so.<driver>  (+ .so.1, .so links)
#   build.sh --image  everything deployments/nvml-mock/Dockerfile compiles, for
#                     the nvml-mock image (hack/realstack):
#     <cache>/upstream/<source>-<recipe>-image/
#       lib/      the mock libraries (NVML, CUDA, InfiniBand, PCI sysfs), each
#                 built by its own Makefile, with their .so.1 and .so links
#       bin/      mock-ib nvml-mock-nri nvml-mock-ctl render-pci-sysfs
#                 render-imex-procdevices check-fabric        (/usr/local/bin)
#       usr-bin/  nvidia-imex nvidia-imex-ctl nv-fabricmanager
#                 nv-fabricmanager-ctl                        (/usr/bin)
#       scripts/  deployments/nvml-mock/scripts
#       chart/    deployments/nvml-mock/helm/nvml-mock
#
# The source, in this order:
#   1. the pinned tarball, checked against its sha256: $ALLOCWATCH_UPSTREAM_TARBALL,
#      else ../shared/upstream/<tarball> beside the repository; no network at all;
#   2. without it, a shallow git clone of the pinned commit from the repository
#      ($ALLOCWATCH_UPSTREAM_GIT overrides the URL).
# <source> is tar-<sha256> or git-<commit> (abbreviated) and <recipe> hashes
# VERSION and this script, so a changed source or recipe builds afresh; a
# complete directory is reused as is. <cache> is $ALLOCWATCH_CACHE (see
# hack/common.sh); GOCACHE lives under it too.
# Upstream builds with its own vendor/ (GOFLAGS=-mod=vendor GOPROXY=off) and
# its own Makefile for the mock library (its --defsym aliases are what lets
# nvidia-smi and pynvml dlsym the unversioned NVML names).
#
# Exit codes: 0 built (or cached); 1 anything failed (one line on stderr says what).
set -euo pipefail

image=false
case "${1:-}" in
  "") ;;
  --image) image=true ;;
  *) echo "usage: build.sh [--image]" >&2; exit 1 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the directory the repository sits in, where shared/upstream/ is looked for
beside=$(cd "$here/../../.." && pwd)
pin() { sed -n "s/^$1=//p" "$here/VERSION"; }
repository=${ALLOCWATCH_UPSTREAM_GIT:-$(pin repository)}
commit=$(pin commit)
tarball_sha256=$(pin tarball_sha256)

# shellcheck source=hack/common.sh
. "$here/../common.sh"
cache=$(allocwatch_cache_dir)
root=$cache/upstream
recipe=$(cat "$here/VERSION" "$here/build.sh" | sha256sum | cut -c1-8)

# SOURCE is written last, and a build is moved into place whole.
complete() { [ -f "$1/SOURCE" ]; }

# An explicit tarball must exist; the default one is optional.
if [ -n "${ALLOCWATCH_UPSTREAM_TARBALL:-}" ]; then
  tarball=$ALLOCWATCH_UPSTREAM_TARBALL
  [ -f "$tarball" ] || die "ALLOCWATCH_UPSTREAM_TARBALL=$tarball: no such file"
else
  tarball=$beside/shared/upstream/$(pin tarball)
  [ -f "$tarball" ] || tarball=
fi
if [ -n "$tarball" ]; then
  # Checked on every run, warm or cold: a cached build must not stand in for
  # a tarball that has since changed under the same name.
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  [ "$got" = "$tarball_sha256" ] ||
    die "$tarball has sha256 $got, not the pinned $tarball_sha256 (hack/upstream/VERSION); refusing to build it"
  source=tar-${tarball_sha256:0:12}
else
  source=git-${commit:0:12}
fi
out=$root/$source-$recipe
if $image; then out=$out-image; fi
if complete "$out"; then
  echo "$out"
  exit 0
fi

# Looked up only once a build is needed: a complete cache needs no Go.
go=${GO:-$(find_go || true)}
if [ -z "$go" ] || ! "$go" version >/dev/null 2>&1; then
  die "no working Go toolchain (${go:-none found}; put go on PATH or set GO=...)"
fi
command -v make >/dev/null 2>&1 || die "no make on PATH (upstream's mock library builds with its Makefile)"
# upstream's Makefile calls plain `go`
export PATH=$(dirname "$go"):$PATH
export GOCACHE=$cache/go/build
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
# -trimpath: each build unpacks into a new temporary directory, and only
# path-free builds can reuse GOCACHE across them.
export GOFLAGS="-mod=vendor -buildvcs=false -trimpath"
export GOPROXY=off
export CGO_ENABLED=1

mkdir -p "$root"
work=$(mktemp -d)
stage=$(mktemp -d "$root/.build-XXXXXX")
trap 'rm -rf "$work" "$stage"' EXIT
src=$work/src
mkdir "$src"
if [ -n "$tarball" ]; then
  log "building from $tarball"
  tar xzf "$tarball" -C "$src" --strip-components=1 || die "cannot unpack $tarball"
  origin="$(basename "$tarball") sha256 $tarball_sha256 ($commit)"
else
  log "no upstream tarball; cloning $commit from $repository"
  git -C "$src" init -q
  # git's own complaint first, then ours as the last line (a local upload-pack
  # would otherwise print after it)
  if ! git -C "$src" fetch -q --depth 1 "$repository" "$commit" 2>"$work/fetch.err"; then
    cat "$work/fetch.err" >&2
    die "cannot fetch $commit from $repository (no tarball at ../shared/upstream/ either)"
  fi
  git -C "$src" -c advice.detachedHead=false checkout -q FETCH_HEAD
  head=$(git -C "$src" rev-parse HEAD)
  [ "$head" = "$commit" ] || die "$repository gave $head for the pinned $commit"
  origin="$repository@$commit"
fi

# The compilers' output (cgo's deprecation warnings run to thousands of lines)
# goes to a log, whose tail is shown when a step fails.
build_log=$work/build.log
step() {
  local what=$1
  shift
  log "$what"
  if ! "$@" >>"$build_log" 2>&1; then
    tail -n 60 "$build_log" >&2
    die "$what failed with $("$go" env GOVERSION) (the log's tail is above)"
  fi
}
go_build() { step "go build $2" bash -c 'cd "$1" && "$2" build -o "$3" "$4"' _ "$src" "$go" "$1" "$2"; }
if $image; then
  # As the Dockerfile builds them: each mock library by its Makefile, then the
  # Go commands at the paths the image puts them.
  mkdir "$stage/lib" "$stage/bin" "$stage/usr-bin"
  for dir in pkg/gpu/mocknvml pkg/gpu/mockcuda pkg/network/mockib pkg/system/mockpcisysfs; do
    step "make -C $dir" make -C "$src/$dir"
    cp -a "$src/$dir"/lib*.so* "$stage/lib/"
  done
  for cmd in mock-ib nvml-mock-nri nvml-mock-ctl render-pci-sysfs render-imex-procdevices check-fabric; do
    go_build "$stage/bin/$cmd" "./cmd/$cmd"
  done
  go_build "$stage/usr-bin/nvidia-imex" ./cmd/fake-imex/daemon
  go_build "$stage/usr-bin/nvidia-imex-ctl" ./cmd/fake-imex/ctl
  go_build "$stage/usr-bin/nv-fabricmanager" ./cmd/fake-fabricmanager/daemon
  go_build "$stage/usr-bin/nv-fabricmanager-ctl" ./cmd/fake-fabricmanager/ctl
  cp -a "$src/deployments/nvml-mock/scripts" "$stage/scripts"
  chmod 0755 "$stage"/scripts/*
  cp -a "$src/deployments/nvml-mock/helm/nvml-mock" "$stage/chart"
  cp "$src/LICENSE" "$stage/LICENSE"
else
  # (a) the mock NVML library, exactly as upstream's Makefile (and so its image) builds it.
  step "make -C pkg/gpu/mocknvml" make -C "$src/pkg/gpu/mocknvml"
  lib=$(readlink "$src/pkg/gpu/mocknvml/libnvidia-ml.so.1") || die "the Makefile made no libnvidia-ml.so.1"
  cp "$src/pkg/gpu/mocknvml/$lib" "$stage/$lib"
  ln -s "$lib" "$stage/libnvidia-ml.so.1"
  ln -s libnvidia-ml.so.1 "$stage/libnvidia-ml.so"
  # (b) the CLI, including `watch-allocations`.
  go_build "$stage/nvml-mock-ctl" ./cmd/nvml-mock-ctl
fi
echo "$origin" >"$stage/SOURCE"

rm -rf "$out"
mv "$stage" "$out"
chmod 0755 "$out"
echo "$out"
