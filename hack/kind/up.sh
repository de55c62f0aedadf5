#!/usr/bin/env bash
# kind on nerdctl on this machine (root, Debian 12, offline):
#   packages -> build.sh (kind, nerdctl, Kubernetes, etcd, containerd) ->
#   the record of the machine -> our containerd -> the project's images
#   (../cluster/images.sh, with our dockerd, kept running for `kind load
#   docker-image`) -> the node image (node-image.sh), loaded into nerdctl ->
#   a one-node kind cluster, unless --runtime-only (make e2e: pytest-kind
#   creates and deletes the cluster itself).
# Idempotent: running daemons are left alone, built and loaded things reused.
# Source env.sh afterwards to use kind, nerdctl and kubectl; down.sh undoes it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$KIND_DIR/hoststate.sh"

usage() { echo "usage: $0 [--runtime-only]" >&2; exit 2; }
create_cluster=true
case ${1:-} in
  "") ;;
  --runtime-only) create_cluster=false ;;
  *) usage ;;
esac
[ "$(id -u)" = 0 ] || die "run as root: containerd, nerdctl and kind's nodes need it"
started=$(date +%s)
mkdir -p "$STATE" "$RUNDIR" "$LOGDIR" "$KIND_RUN"
lock_state

# ---------------------------------------------------------------- packages
# Binary -> Debian package; apt-get update runs only when something is missing.
declare -A PKGS=(
  [debootstrap]=debootstrap [dockerd]=docker.io [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [pkg-config]=pkg-config [/usr/include/seccomp.h]=libseccomp-dev [gcc]=gcc
  [/usr/lib/x86_64-linux-gnu/libc.a]=libc6-dev [ip]=iproute2 [findmnt]=util-linux [sysctl]=procps
)
missing=()
for bin in "${!PKGS[@]}"; do
  if [[ $bin == /* ]]; then [ -e "$bin" ] || missing+=("${PKGS[$bin]}")
  else command -v "$bin" >/dev/null 2>&1 || missing+=("${PKGS[$bin]}")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------- binaries
"$KIND_DIR/build.sh"
kind_path

# What down.sh puts back: iptables, cgroups, host paths, links and sysctls
# as they are before anything of ours runs.
kind_host_record
# kind mounts /lib/modules into its nodes, and nerdctl refuses a bind mount
# whose source is missing, as it is on a kernel without modules.
mkdir -p /lib/modules

# ---------------------------------------------------------------- containerd
# Its own root, state and socket; no CRI and no NRI (nerdctl and dockerd are
# its only clients); containerd's opt directory under its root, not /opt.
cat >"$STATE/containerd.toml" <<EOF
version = 3
root = "$STATE/containerd"
state = "$KIND_RUN/containerd"
imports = []
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins.'io.containerd.internal.v1.opt']
  path = "$STATE/containerd/opt"
EOF
containerd_ok() { ctr --timeout 5s version; }
if pid_alive containerd; then
  log "containerd already running (pid $(pid_of containerd))"
else
  rm -f "$CONTAINERD_SOCK"
  log "starting containerd"
  start_daemon containerd "$CONTAINERD_BIN/containerd" --config "$STATE/containerd.toml"
  wait_for containerd 30 containerd_ok
fi

# nerdctl: everything under $STATE, Debian's CNI plugins, cgroupfs (no
# systemd as PID 1 here).
cat >"$NERDCTL_TOML" <<EOF
address = "unix://$CONTAINERD_SOCK"
namespace = "$CONTAINERD_NAMESPACE"
data_root = "$STATE/nerdctl"
cni_path = "/usr/lib/cni"
cni_netconfpath = "$STATE/cni/net.d"
cgroup_manager = "cgroupfs"
hosts_dir = ["$STATE/certs.d"]
EOF
mkdir -p "$STATE/cni/net.d"

# ---------------------------------------------------------------- images
# The project's images, built by the local cluster's recipe into our dockerd
# (kind loads them from there); the real stack's are not needed on kind.
# images.sh takes the state lock itself: ours is let go meanwhile.
flock -u 9
ALLOCWATCH_REALSTACK_IMAGES=0 "$CLUSTER_DIR/images.sh" >/dev/null
flock 9
read -r node_tar NODE_IMAGE < <("$KIND_DIR/node-image.sh")
if nerdctl image inspect "$NODE_IMAGE" >/dev/null 2>&1; then
  log "$NODE_IMAGE already loaded"
else
  log "loading $NODE_IMAGE into nerdctl"
  nerdctl load -i "$node_tar" >/dev/null
fi
# Node images of older recipes only fill our containerd's root.
for old in $(nerdctl images --format '{{.Repository}}:{{.Tag}}' "${NODE_IMAGE%:*}"); do
  [ "$old" = "$NODE_IMAGE" ] || nerdctl rmi "$old" >/dev/null 2>&1 || true
done
set_image_env KIND_NODE_IMAGE "$NODE_IMAGE"
log "kind runtime ready in $(( $(date +%s) - started ))s"

# ---------------------------------------------------------------- cluster
if $create_cluster; then
  if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
    log "kind cluster $CLUSTER_NAME already exists"
  else
    kind create cluster --name "$CLUSTER_NAME" --image "$NODE_IMAGE" \
      --config "$KIND_DIR/files/cluster.yaml" --kubeconfig "$STATE/kubeconfig"
  fi
  for image in $(sed -n 's/^\(ALLOCWATCH\|FAKEPLUGIN\)_IMAGE=//p' "$STATE/images.env"); do
    kind load docker-image --name "$CLUSTER_NAME" "$image"
  done
  log "kind cluster $CLUSTER_NAME up in $(( $(date +%s) - started ))s"
  echo "KUBECONFIG=$STATE/kubeconfig"
fi
