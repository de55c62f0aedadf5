# shellcheck shell=bash
# Source this file (bash) to use the local cluster:
#   . hack/cluster/env.sh
# It exports KUBECONFIG, KUBECTL and K8S_BIN (the cluster's own kubectl, also
# first on PATH), the harness directories, ALLOCWATCH_KUBELET_ROOT, and the
# image references recorded by cluster-up/cluster-images (BUSYBOX_IMAGE,
# ALLOCWATCH_IMAGE, FAKEPLUGIN_IMAGE) when present. It prints nothing.
ALLOCWATCH_CACHE=${ALLOCWATCH_CACHE:-/var/cache/allocwatch}
ALLOCWATCH_CLUSTER_STATE=${ALLOCWATCH_CLUSTER_STATE:-/var/lib/allocwatch-cluster}
ALLOCWATCH_CLUSTER_LOGS=${ALLOCWATCH_CLUSTER_LOGS:-/var/log/allocwatch-cluster}
export ALLOCWATCH_CACHE ALLOCWATCH_CLUSTER_STATE ALLOCWATCH_CLUSTER_LOGS
export KUBECONFIG=$ALLOCWATCH_CLUSTER_STATE/admin.kubeconfig
export ALLOCWATCH_IMAGES_ENV=$ALLOCWATCH_CLUSTER_STATE/images.env
export ALLOCWATCH_KUBELET_ROOT=/var/lib/kubelet
if [ -f "$ALLOCWATCH_CLUSTER_STATE/bin.env" ]; then
  set -a
  # shellcheck disable=SC1091
  . "$ALLOCWATCH_CLUSTER_STATE/bin.env"
  set +a
  export KUBECTL=$K8S_BIN/kubectl
  export PATH=$K8S_BIN:$PATH
fi
if [ -f "$ALLOCWATCH_IMAGES_ENV" ]; then
  set -a
  # shellcheck disable=SC1090
  . "$ALLOCWATCH_IMAGES_ENV"
  set +a
fi
