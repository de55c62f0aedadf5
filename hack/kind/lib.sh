# Shared settings for the hack/kind scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034
#
# kind on nerdctl, on a containerd of its own. The local cluster's helpers are
# reused (hack/cluster/lib.sh: cache, logs, daemons and pid files;
# hack/realstack/lib.sh: recipe keys and the image packer) with this harness's
# own directories, so the two harnesses never touch each other's state:
#   $STATE  (ALLOCWATCH_KIND_STATE, default /var/lib/allocwatch-kind): its
#           containerd's root (the node image stays imported), nerdctl's data
#           root and networks, our dockerd's data root, pid files, the record
#           of the machine before kind-up (host-before/)
#   $LOGDIR (ALLOCWATCH_KIND_LOGS, default /var/log/allocwatch-kind)
#   $KIND_RUN (/run/allocwatch-kind): the containerd and Docker sockets
# Exported, so that the local cluster's scripts this harness runs
# (hack/cluster/build.sh, hack/cluster/images.sh) work in the same directories.

KIND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ALLOCWATCH_CLUSTER_STATE=${ALLOCWATCH_KIND_STATE:-/var/lib/allocwatch-kind}
export ALLOCWATCH_CLUSTER_LOGS=${ALLOCWATCH_KIND_LOGS:-/var/log/allocwatch-kind}
KIND_RUN=/run/allocwatch-kind
export ALLOCWATCH_CONTAINERD_SOCK=$KIND_RUN/containerd.sock
export ALLOCWATCH_DOCKER_RUN=$KIND_RUN
# shellcheck source=hack/realstack/lib.sh
. "$KIND_DIR/../realstack/lib.sh"

# ctr and nerdctl find our containerd through these; nerdctl reads the rest of
# its settings (data root, CNI paths, cgroup manager) from NERDCTL_TOML.
export CONTAINERD_ADDRESS=$CONTAINERD_SOCK
# The namespace names nerdctl's top-level cgroup, /<namespace>/<container>.
export CONTAINERD_NAMESPACE=allocwatch-kind
export NERDCTL_TOML=$STATE/nerdctl.toml
export KIND_EXPERIMENTAL_PROVIDER=nerdctl
export DOCKER_HOST=unix://$KIND_RUN/docker.sock
CLUSTER_NAME=${ALLOCWATCH_KIND_CLUSTER:-allocwatch-e2e}

# The versions come from the committed go.mod files, as the local cluster's do.
mod_require() { awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) {v = ($1 == m) ? $2 : $3} END {print v}' "$1"; }
KIND_VERSION=$(mod_require "$KIND_DIR/kind/go.mod" sigs.k8s.io/kind)
NERDCTL_VERSION=$(mod_require "$KIND_DIR/nerdctl/go.mod" github.com/containerd/nerdctl/v2)

# kind_path: the built binaries first on PATH (containerd's directory first,
# as bin_dirs puts it), since kind runs `nerdctl` and `docker` by name.
kind_path() {
  bin_dirs
  [ -n "${KIND_BIN:-}" ] || { log "no kind build recorded in $STATE/bin.env: run hack/kind/build.sh"; return 1; }
  PATH=$KIND_BIN:$K8S_BIN:$PATH
  export PATH
}
