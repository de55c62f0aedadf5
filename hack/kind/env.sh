# shellcheck shell=bash
# Source this file (bash, as root) to use kind on nerdctl after hack/kind/up.sh:
#   . hack/kind/env.sh
# It exports what kind, nerdctl, ctr and docker read to find this harness's
# containerd, dockerd and settings (KIND_EXPERIMENTAL_PROVIDER=nerdctl,
# NERDCTL_TOML, CONTAINERD_ADDRESS, CONTAINERD_NAMESPACE, DOCKER_HOST), puts
# the built kind, nerdctl, kubectl and containerd first on PATH, and exports
# KIND, KUBECTL, KUBECONFIG (the cluster up.sh creates) and the image
# references up.sh recorded (KIND_NODE_IMAGE, ALLOCWATCH_IMAGE,
# FAKEPLUGIN_IMAGE). It prints nothing.
# shellcheck source=hack/kind/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [ -f "$STATE/bin.env" ] && kind_path 2>/dev/null; then
  export KIND=$KIND_BIN/kind KUBECTL=$K8S_BIN/kubectl
fi
export KUBECONFIG=$STATE/kubeconfig
if [ -f "$STATE/images.env" ]; then
  set -a
  # shellcheck disable=SC1091
  . "$STATE/images.env"
  set +a
fi
