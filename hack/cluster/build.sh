#!/usr/bin/env bash
# Build (or reuse) the cluster's Go binaries:
#   $CACHE/bin/k8s-<version>-<go>-<os>-<arch>-<inputs>/  kube-apiserver, kube-controller-manager,
#                                                        kube-scheduler, kube-proxy, kubelet, kubectl,
#                                                        kubeadm
#   $CACHE/bin/etcd-<version>-<go>-<os>-<arch>-<inputs>/ etcd
#   $CACHE/bin/containerd-<version>-runc-<version>-<go>-<key>/ containerd 2.x,
#                                                        its shim, ctr and runc
#                                                        (hack/realstack/containerd.sh)
# (<inputs>: a hash of the module's go.mod, go.sum and Go files, and this script)
# A directory exists only once complete (built into a temporary directory and
# renamed), so an interrupted build is simply redone.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
go_env

# kubeadm is for the kind node image (hack/kind), which kind configures with it.
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl kubeadm)

build_k8s() {
  if [ -x "$K8S_BIN/kubelet" ]; then
    log "reusing $K8S_BIN"; return
  fi
  local tmp=$K8S_BIN.tmp.$$ start
  start=$(date +%s)
  local major minor
  major=$(echo "$K8S_VERSION" | sed -E 's/^v([0-9]+)\..*/\1/')
  minor=$(echo "$K8S_VERSION" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')
  # The module zip carries no git metadata; the version vars hack/lib/version.sh
  # would set are set here so `kubectl version` and /version report the release.
  local ld="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ld="$ld -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  mkdir -p "$tmp"
  log "building Kubernetes $K8S_VERSION with $GO_VERSION into $K8S_BIN (cold: about 6 minutes on 2 cores)"
  # One go build for all commands: shared packages compile once, in parallel.
  (cd "$CLUSTER_DIR/k8s" && "$GO" build -trimpath -ldflags "$ld" -o "$tmp/" \
    "${K8S_CMDS[@]/#/k8s.io/kubernetes/cmd/}")
  rm -rf "$K8S_BIN"; mv "$tmp" "$K8S_BIN"
  log "Kubernetes binaries built in $(( $(date +%s) - start ))s"
}

build_etcd() {
  if [ -x "$ETCD_BIN/etcd" ]; then
    log "reusing $ETCD_BIN"; return
  fi
  local tmp=$ETCD_BIN.tmp.$$ start
  start=$(date +%s)
  mkdir -p "$tmp"
  log "building etcd $ETCD_VERSION into $ETCD_BIN"
  (cd "$CLUSTER_DIR/etcd" && "$GO" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" .)
  rm -rf "$ETCD_BIN"; mv "$tmp" "$ETCD_BIN"
  log "etcd built in $(( $(date +%s) - start ))s"
}

mkdir -p "$CACHE/bin" "$STATE"
build_etcd
build_k8s
CONTAINERD_BIN=$("$REPO_ROOT/hack/realstack/containerd.sh") || die "containerd build failed"
printf 'K8S_BIN=%s\nETCD_BIN=%s\nCONTAINERD_BIN=%s\n' "$K8S_BIN" "$ETCD_BIN" "$CONTAINERD_BIN" >"$STATE/bin.env"
