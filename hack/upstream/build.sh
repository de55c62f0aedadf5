#!/usr/bin/env bash
# Build the upstream nvml-mock tools at the pinned commit (hack/upstream/VERSION),
# through the Go module proxy, and print the output directory:
#
#   <cache>/upstream/<pseudo-version>-<recipe>/nvml-mock-ctl
#   <cache>/upstream/<pseudo-version>-<recipe>/libnvidia-ml.so.<driver>  (+ .so.1, .so links)
#
# <cache> is $ALLOCWATCH_CACHE (default /var/cache/allocwatch for root, else
# ${XDG_CACHE_HOME:-~/.cache}/allocwatch); GOMODCACHE and GOCACHE live under it
# too. A directory that is already complete is reused as is.
# Upstream is built as its own main module straight from the module cache, so
# its go.mod/go.sum decide every dependency; none of its source is committed here.
#
# UPSTREAM_SRC=<dir> builds from a local checkout of the pinned commit instead
# of the module proxy (the checkout's HEAD must be that commit); its output goes
# to <cache>/upstream/src-<commit>-<recipe>/.
#
# Exit codes: 0 built (or cached); 1 the build failed; 3 the module proxy does
# not serve the pinned module (nothing can be built on this machine).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pin() { sed -n "s/^$1=//p" "$here/VERSION"; }
module=$(pin module)
commit=$(pin commit)
driver_version=$(pin driver_version)

# shellcheck source=hack/cache-dir.sh
. "$here/../cache-dir.sh"
cache=$(allocwatch_cache_dir)
root=$cache/upstream
# Builds are keyed by the recipe too (the pin file and this script: the driver
# version, the symbol aliases, the flags), so changing either builds afresh.
recipe=$(cat "$here/VERSION" "$here/build.sh" | sha256sum | cut -c1-8)
export GOMODCACHE=$cache/go/mod
export GOCACHE=$cache/go/build
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export GOFLAGS=-buildvcs=false
export CGO_ENABLED=1

log() { echo "build.sh: $*" >&2; }

# Looked up only once a build is needed: a complete cache needs no Go.
find_go() {
  go=${GO:-}
  if [ -z "$go" ]; then
    if command -v go >/dev/null 2>&1; then go=$(command -v go)
    elif [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go
    fi
  fi
  if [ -z "$go" ] || ! "$go" version >/dev/null 2>&1; then
    log "no working Go toolchain (${go:-none found}; put go on PATH or set GO=...)"
    exit 1
  fi
}
complete() { [ -x "$1/nvml-mock-ctl" ] && [ -e "$1/libnvidia-ml.so.1" ]; }

mkdir -p "$root"
if [ -n "${UPSTREAM_SRC:-}" ]; then
  head=$(git -C "$UPSTREAM_SRC" rev-parse HEAD 2>/dev/null || true)
  if [ "$head" != "$commit" ]; then
    log "UPSTREAM_SRC=$UPSTREAM_SRC is at '${head:-not a git checkout}', not the pinned $commit"
    exit 1
  fi
  version=src-$commit
  src=$(cd "$UPSTREAM_SRC" && pwd)
fi
# The commit → pseudo-version answer is cached too, so a warm cache builds offline.
resolved=$root/commit-$commit
if [ -z "${src:-}" ] && [ -s "$resolved" ]; then version=$(cat "$resolved"); fi
# A complete build needs no Go at all.
if [ -n "${version:-}" ] && complete "$root/$version-$recipe"; then
  echo "$root/$version-$recipe"
  exit 0
fi

find_go
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "${src:-}" ]; then
cd "$work"
"$go" mod init allocwatch.invalid/upstream-build >/dev/null 2>&1 || {
  log "go mod init failed in $work"
  exit 1
}
log "resolving $module@$commit through the module proxy"
if ! "$go" mod download -json "$module@$commit" >download.json 2>download.err; then
  cat download.json download.err >&2
  if grep -qiE 'not available|403|404|410|not found|unknown revision' download.json download.err; then
    log "the Go module proxy does not serve $module@$commit; cannot build upstream here"
    exit 3
  fi
  exit 1
fi
json() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" download.json | head -n1; }
version=$(json Version)
src=$(json Dir)
if [ -z "$version" ] || [ ! -d "$src" ]; then
  cat download.json >&2
  log "could not resolve $module@$commit"
  exit 1
fi
echo "$version" >"$resolved"
# Upstream commits vendor/, but a module zip keeps only vendor/modules.txt, so
# the go command would pick vendor mode and find no packages there. Build from
# go.mod and go.sum instead; a checkout (UPSTREAM_SRC) has the whole vendor/.
export GOFLAGS="$GOFLAGS -mod=readonly"
fi
out=$root/$version-$recipe
if complete "$out"; then
  echo "$out"
  exit 0
fi
log "building $module at $version"

stage=$(mktemp -d "$root/.build-XXXXXX")
trap 'rm -rf "$work" "$stage"' EXIT
cd "$src"

hint() {
  log "build failed; if go.mod asks for a newer Go than $("$go" env GOVERSION), rerun with GOTOOLCHAIN=go1.27.3"
  exit 1
}

# (a) the CLI, including `watch-allocations`.
"$go" build -trimpath -o "$stage/nvml-mock-ctl" ./cmd/nvml-mock-ctl || hint

# (b) the mock NVML library, linked the way upstream's pkg/gpu/mocknvml/Makefile
# links it: soname libnvidia-ml.so.1, the unversioned NVML names aliased to
# their versioned symbols, and no size padding (build tag nopadding).
aliases=(
  nvmlDeviceGetPciInfo=nvmlDeviceGetPciInfo_v3
  nvmlDeviceGetHandleByPciBusId=nvmlDeviceGetHandleByPciBusId_v2
  nvmlDeviceGetNvLinkRemotePciInfo=nvmlDeviceGetNvLinkRemotePciInfo_v2
  nvmlDeviceRemoveGpu=nvmlDeviceRemoveGpu_v2
  nvmlDeviceGetGridLicensableFeatures=nvmlDeviceGetGridLicensableFeatures_v4
  nvmlEventSetWait=nvmlEventSetWait_v2
  nvmlDeviceGetAttributes=nvmlDeviceGetAttributes_v2
  nvmlComputeInstanceGetInfo=nvmlComputeInstanceGetInfo_v2
  nvmlDeviceGetComputeRunningProcesses=nvmlDeviceGetComputeRunningProcesses_v3
  nvmlDeviceGetGraphicsRunningProcesses=nvmlDeviceGetGraphicsRunningProcesses_v3
  nvmlDeviceGetMPSComputeRunningProcesses=nvmlDeviceGetMPSComputeRunningProcesses_v3
  nvmlDeviceGetGpuInstancePossiblePlacements=nvmlDeviceGetGpuInstancePossiblePlacements_v2
  nvmlVgpuInstanceGetLicenseInfo=nvmlVgpuInstanceGetLicenseInfo_v2
  nvmlDeviceGetDriverModel=nvmlDeviceGetDriverModel_v2
)
ldflags="-Wl,-soname,libnvidia-ml.so.1"
for a in "${aliases[@]}"; do ldflags+=" -Wl,--defsym,$a"; done
lib=libnvidia-ml.so.$driver_version
bridge=$src/pkg/gpu/mocknvml/bridge
if [ ! -d "$bridge" ] && [ -z "${UPSTREAM_SRC:-}" ]; then
  # A nested module is left out of the root module's zip: fetch it on its own.
  (cd "$work" && "$go" mod download -json "$module/pkg/gpu/mocknvml/bridge@$commit" >bridge.json) || hint
  bridge=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' "$work/bridge.json" | head -n1)
fi
cd "$bridge"
CGO_LDFLAGS_ALLOW='--defsym|-soname' CGO_LDFLAGS="$ldflags" \
  "$go" build -trimpath -tags nopadding -buildmode=c-shared -o "$stage/$lib" . || hint
rm -f "$stage"/*.h
ln -sf "$lib" "$stage/libnvidia-ml.so.1"
ln -sf libnvidia-ml.so.1 "$stage/libnvidia-ml.so"
echo "$module@$version ($commit)" >"$stage/SOURCE"

rm -rf "$out"
mv "$stage" "$out"
chmod 0755 "$out"
echo "$out"
