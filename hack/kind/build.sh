#!/usr/bin/env bash
# Build (or reuse) what a kind cluster on nerdctl needs, and record it in
# $STATE/bin.env:
#   the local cluster's binaries (../cluster/build.sh): Kubernetes with
#   kubeadm, etcd, containerd 2.x and runc, which go into the node image, and
#   whose containerd also runs the nodes;
#   $CACHE/bin/kind-<version>-nerdctl-<version>-<go>-<key>/  kind, nerdctl
# (<key>: a hash of kind/ and nerdctl/ (go.mod, go.sum, the tigron stand-in),
# this script and the build's Go settings). The directory appears only once
# complete.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$CLUSTER_DIR/build.sh"
go_env
key=$({ echo "$GO_BUILD_ENV"
  cat "$KIND_DIR"/kind/go.mod "$KIND_DIR"/kind/go.sum "$KIND_DIR"/nerdctl/go.mod "$KIND_DIR"/nerdctl/go.sum \
    "$KIND_DIR"/nerdctl/tigron/go.mod "$0"; } | sha256sum | cut -c1-8)
out=$CACHE/bin/kind-$KIND_VERSION-nerdctl-$NERDCTL_VERSION-$GO_VERSION-$key
if [ -x "$out/nerdctl" ]; then
  log "reusing $out"
else
  tmp=$out.tmp.$$
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp"
  started=$(date +%s)
  log "building kind $KIND_VERSION"
  (cd "$KIND_DIR/kind" && "$GO" build -trimpath -ldflags "-s -w" -o "$tmp/kind" sigs.k8s.io/kind)
  log "building nerdctl $NERDCTL_VERSION (cold: about 2 minutes)"
  (cd "$KIND_DIR/nerdctl" && "$GO" build -trimpath -o "$tmp/nerdctl" \
    -ldflags "-s -w -X github.com/containerd/nerdctl/v2/pkg/version.Version=$NERDCTL_VERSION" \
    github.com/containerd/nerdctl/v2/cmd/nerdctl)
  rm -rf "$out"; mv "$tmp" "$out"; trap - EXIT
  log "kind and nerdctl built in $(( $(date +%s) - started ))s"
fi
sed -i '/^KIND_BIN=/d' "$STATE/bin.env"
echo "KIND_BIN=$out" >>"$STATE/bin.env"
