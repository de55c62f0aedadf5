#!/usr/bin/env bash
# containerd 2.x (containerd, containerd-shim-runc-v2, ctr) and runc, built
# from their Go modules (containerd/go.mod pins both), and print the output
# directory:
#   $CACHE/bin/containerd-<version>-runc-<version>-<go>-<key>/
# <key> hashes go.mod, go.sum, this script and the build settings.
#
# Debian's runc 1.1.5 predates containerd 2.x, so runc comes from its module
# too, with seccomp (libseccomp-dev) as in runc's own Makefile, and without
# libpathrs (a Rust library Debian 12 does not package; runc then uses its Go
# fallback). containerd needs no cgo once btrfs is left out, as in its static
# release builds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MODDIR=$REALSTACK_DIR/containerd
mod_version() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2}' "$MODDIR/go.mod"; }
CONTAINERD_VERSION=$(mod_version github.com/containerd/containerd/v2)
RUNC_VERSION=$(mod_version github.com/opencontainers/runc)
[ -n "$CONTAINERD_VERSION" ] && [ -n "$RUNC_VERSION" ] || die "containerd or runc missing from $MODDIR/go.mod"
CONTAINERD_TAGS=no_btrfs
RUNC_TAGS="seccomp urfave_cli_no_docs"
pkg-config --exists libseccomp 2>/dev/null || die "libseccomp-dev is missing (apt-get install libseccomp-dev)"

realstack_go_env
export GOFLAGS=-mod=mod
key=$(printf '%s\n' "$CONTAINERD_TAGS/$RUNC_TAGS" "$(recipe_key "$MODDIR/go.mod" "$MODDIR/go.sum" "$0")" | sha256sum | cut -c1-8)
out=$CACHE/bin/containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-$GO_VERSION-$key
if [ -x "$out/runc" ]; then echo "$out"; exit 0; fi

mkdir -p "$CACHE/bin"
tmp=$(mktemp -d "$CACHE/bin/.containerd.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$MODDIR"
ctd=github.com/containerd/containerd/v2
log "go build containerd $CONTAINERD_VERSION"
CGO_ENABLED=0 "$GO" build -trimpath -tags "$CONTAINERD_TAGS" -o "$tmp/" \
  -ldflags "-s -w -X $ctd/version.Version=$CONTAINERD_VERSION -X $ctd/version.Package=$ctd" \
  "$ctd/cmd/containerd" "$ctd/cmd/containerd-shim-runc-v2" "$ctd/cmd/ctr"
log "go build runc $RUNC_VERSION"
CGO_ENABLED=1 "$GO" build -trimpath -tags "$RUNC_TAGS" -o "$tmp/runc" \
  -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" github.com/opencontainers/runc
chmod 0755 "$tmp"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "built into $out"
echo "$out"
