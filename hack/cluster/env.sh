# Source this file to use the local cluster:
#   . hack/cluster/env.sh
# It exports KUBECONFIG, puts the cluster's kubectl first on PATH, and exports
# the image references recorded by cluster-up/cluster-images
# (BUSYBOX_IMAGE, ALLOCWATCH_IMAGE, FAKEPLUGIN_IMAGE) when present.
ALLOCWATCH_CACHE=${ALLOCWATCH_CACHE:-/var/cache/allocwatch}
ALLOCWATCH_CLUSTER_STATE=${ALLOCWATCH_CLUSTER_STATE:-/var/lib/allocwatch-cluster}
ALLOCWATCH_CLUSTER_LOGS=${ALLOCWATCH_CLUSTER_LOGS:-/var/log/allocwatch-cluster}
export ALLOCWATCH_CACHE ALLOCWATCH_CLUSTER_STATE ALLOCWATCH_CLUSTER_LOGS
export KUBECONFIG=$ALLOCWATCH_CLUSTER_STATE/admin.kubeconfig
export ALLOCWATCH_IMAGES_ENV=$ALLOCWATCH_CLUSTER_STATE/images.env
if [ -f "$ALLOCWATCH_CLUSTER_STATE/bin.env" ]; then
  # shellcheck disable=SC1091
  . "$ALLOCWATCH_CLUSTER_STATE/bin.env"
  export PATH=$K8S_BIN:$PATH
fi
if [ -f "$ALLOCWATCH_IMAGES_ENV" ]; then
  set -a
  # shellcheck disable=SC1090
  . "$ALLOCWATCH_IMAGES_ENV"
  set +a
fi
