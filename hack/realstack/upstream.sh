#!/usr/bin/env bash
# Build everything deployments/nvml-mock/Dockerfile compiles, from the pinned
# upstream tarball (sha256-checked, vendored, no network), and print the
# output directory:
#   <cache>/realstack/upstream-<commit>-<key>/
#     lib/      the mock libraries (NVML with its --defsym aliases, CUDA,
#               InfiniBand, PCI sysfs) with their .so.1 and .so links
#     bin/      mock-ib nvml-mock-nri nvml-mock-ctl render-pci-sysfs
#               render-imex-procdevices check-fabric        (/usr/local/bin)
#     usr-bin/  nvidia-imex nvidia-imex-ctl nv-fabricmanager
#               nv-fabricmanager-ctl                        (/usr/bin)
#     scripts/  deployments/nvml-mock/scripts
#     chart/    deployments/nvml-mock/helm/nvml-mock, for helm
# <key> hashes the tarball's digest, this script and the Go version.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -f "$UPSTREAM_TARBALL" ] || die "upstream tarball not found: $UPSTREAM_TARBALL"
realstack_go_env
key=$(printf '%s\n' "$UPSTREAM_SHA256" "$GO_VERSION" "$(recipe_key "$0")" | sha256sum | cut -c1-12)
out=$CACHE/realstack/upstream-3b2b865d-$key
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

echo "$UPSTREAM_SHA256  $UPSTREAM_TARBALL" | sha256sum --check --quiet \
  || die "$UPSTREAM_TARBALL does not match its pinned sha256"
mkdir -p "$CACHE/realstack"
work=$(mktemp -d "$CACHE/realstack/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xzf "$UPSTREAM_TARBALL" -C "$work"
src=$work/k8s-test-infra-3b2b865d
stage=$work/out
mkdir -p "$stage"/{lib,bin,usr-bin}
export GOFLAGS="-mod=vendor -trimpath" GOPROXY=off

log "building the mock libraries (make, as the Dockerfile does)"
# The Makefile asks git for the repository root for its docker target; in an
# extracted tarball that prints a harmless "not a git repository".
for dir in pkg/gpu/mocknvml pkg/gpu/mockcuda pkg/network/mockib pkg/system/mockpcisysfs; do
  make -C "$src/$dir" >"$work/make.log" 2>&1 || { tail -40 "$work/make.log" >&2; die "make -C $dir failed"; }
  cp -a "$src/$dir"/lib*.so* "$stage/lib/"
done

log "building the Go commands"
cd "$src"
# go-nvml's cgo prolog warns about every deprecated NVML call; the output
# is shown only when a build fails.
go_build() { "$GO" build -o "$1" "$2" >"$work/go.log" 2>&1 || { tail -40 "$work/go.log" >&2; die "go build $2 failed"; }; }
for cmd in mock-ib nvml-mock-nri nvml-mock-ctl render-pci-sysfs render-imex-procdevices check-fabric; do
  go_build "$stage/bin/$cmd" "./cmd/$cmd"
done
go_build "$stage/usr-bin/nvidia-imex" ./cmd/fake-imex/daemon
go_build "$stage/usr-bin/nvidia-imex-ctl" ./cmd/fake-imex/ctl
go_build "$stage/usr-bin/nv-fabricmanager" ./cmd/fake-fabricmanager/daemon
go_build "$stage/usr-bin/nv-fabricmanager-ctl" ./cmd/fake-fabricmanager/ctl
cp -a deployments/nvml-mock/scripts "$stage/scripts"
chmod 0755 "$stage"/scripts/*
cp -a deployments/nvml-mock/helm/nvml-mock "$stage/chart"
cp LICENSE "$stage/LICENSE"
touch "$stage/.complete"

rm -rf "$out"
mv "$stage" "$out"
log "upstream built into $out"
echo "$out"
