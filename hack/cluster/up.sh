#!/usr/bin/env bash
# Turn this machine into a one-node Kubernetes cluster (root, offline).
# Idempotent: components that are already running (per their pid files) are
# left alone, cached binaries and images are reused. Order:
#   packages -> Go binaries -> PKI -> containerd -> node images -> etcd ->
#   kube-apiserver -> kube-controller-manager -> kube-scheduler -> kube-proxy
#   -> kubelet
# and then waits until the node is Ready and the default ServiceAccount exists.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hoststate.sh"

[ "$(id -u)" = 0 ] || die "run as root: the kubelet and containerd manage cgroups, mounts and iptables"
started=$(date +%s)
mkdir -p "$STATE" "$RUNDIR" "$LOGDIR"
lock_state

# ---------------------------------------------------------------- packages
# Binary -> Debian package. apt-get update runs only when something is missing.
# containerd and runc are built (build.sh); runc's seccomp needs libseccomp.
declare -A PKGS=(
  [pkg-config]=pkg-config [/usr/include/seccomp.h]=libseccomp-dev [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables [/bin/busybox]=busybox-static [gcc]=gcc [openssl]=openssl
  [curl]=curl [ip]=iproute2 [mount]=mount [findmnt]=util-linux [sysctl]=procps
  [dpkg-query]=dpkg [nft]=nftables
)
missing=()
for bin in "${!PKGS[@]}"; do
  if [[ $bin == /* ]]; then [ -e "$bin" ] || missing+=("${PKGS[$bin]}")
  else command -v "$bin" >/dev/null 2>&1 || missing+=("${PKGS[$bin]}")
  fi
done
# gcc -static needs the C library's static archive.
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || missing+=(libc6-dev)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The machine's iptables and cgroups before anything of ours runs, which
# cluster-down puts back (hoststate.sh); then the root mount shared, as on a
# systemd host or a kind node (hoststate.sh says why).
host_record
host_share_root

# ---------------------------------------------------------------- binaries
"$CLUSTER_DIR/build.sh"
bin_dirs

# ---------------------------------------------------------------- PKI
"$CLUSTER_DIR/pki.sh"
NODE_IP=$(node_ip)

# ---------------------------------------------------------------- containerd
# The CNI conflist: 10- sorts before podman's 87-podman-bridge.conflist, and
# the firewall plugin accepts pod traffic despite the FORWARD DROP policy.
mkdir -p /etc/cni/net.d
install -m 0644 "$CLUSTER_DIR/files/10-k8s-bridge.conflist" /etc/cni/net.d/10-k8s-bridge.conflist
sed "s#@RUNC@#$CONTAINERD_BIN/runc#" "$CLUSTER_DIR/files/containerd.toml" >"$STATE/containerd.toml"

containerd_ok() { ctr --address "$CONTAINERD_SOCK" --timeout 5s version; }
if pid_alive containerd; then
  log "containerd already running (pid $(pid_of containerd))"
else
  if [ -S "$CONTAINERD_SOCK" ] && containerd_ok >/dev/null 2>&1; then
    die "a containerd that this harness did not start already serves $CONTAINERD_SOCK; stop it first (this harness never stops processes it did not start)"
  fi
  rm -f "$CONTAINERD_SOCK"
  log "starting containerd"
  start_daemon containerd "$CONTAINERD_BIN/containerd" --config "$STATE/containerd.toml"
  wait_for containerd 30 containerd_ok
fi

"$CLUSTER_DIR/node-images.sh"

# ---------------------------------------------------------------- etcd
# Plain HTTP on loopback only; the data dir is removed by cluster-down so every
# cluster-up starts from an empty API.
etcd_ok() { curl -fsS --max-time 5 http://127.0.0.1:2379/health | grep -q '"health":"true"'; }
if pid_alive etcd; then
  log "etcd already running"
else
  log "starting etcd $ETCD_VERSION"
  start_daemon etcd "$ETCD_BIN/etcd" --name local --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster local=http://127.0.0.1:2380 --initial-cluster-state new
  wait_for etcd 30 etcd_ok
fi

# ---------------------------------------------------------------- kube-apiserver
if pid_alive kube-apiserver; then
  log "kube-apiserver already running"
else
  start_apiserver
fi

# ---------------------------------------------------------------- controllers
# Default controller set (node lifecycle, daemonset, serviceaccount and its
# token publisher, garbage collector, ...). No node CIDR allocation: the
# conflist's host-local range is the pod network.
if pid_alive kube-controller-manager; then
  log "kube-controller-manager already running"
else
  log "starting kube-controller-manager"
  start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$STATE/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 \
    --leader-elect=false \
    --use-service-account-credentials=true \
    --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --allocate-node-cidrs=false \
    --profiling=false
fi
if pid_alive kube-scheduler; then
  log "kube-scheduler already running"
else
  log "starting kube-scheduler"
  start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig="$STATE/scheduler.kubeconfig" \
    --authorization-kubeconfig="$STATE/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 \
    --leader-elect=false \
    --profiling=false
fi
healthz() { curl -fsSk --max-time 5 "https://127.0.0.1:$1/healthz"; }
wait_for kube-controller-manager 60 healthz 10257
wait_for kube-scheduler 60 healthz 10259

# ---------------------------------------------------------------- kube-proxy
# iptables mode, the Linux default. It leaves the machine's sysctls alone:
# conntrack sizes and timeouts are not set, and localhost NodePorts (which
# need route_localnet) are off. Its chains are KUBE-*, which cluster-down
# removes with the kubelet's.
cat >"$STATE/kube-proxy-config.yaml.new" <<KPCFG
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
clientConnection:
  kubeconfig: $STATE/kube-proxy.kubeconfig
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
KPCFG
# kube-proxy exits when its config file changes, even to the same content:
# the file is replaced only when it differs, and a running one stopped first.
if cmp -s "$STATE/kube-proxy-config.yaml.new" "$STATE/kube-proxy-config.yaml"; then
  rm -f "$STATE/kube-proxy-config.yaml.new"
else
  stop_pid kube-proxy
  mv "$STATE/kube-proxy-config.yaml.new" "$STATE/kube-proxy-config.yaml"
fi
if pid_alive kube-proxy; then
  log "kube-proxy already running"
else
  log "starting kube-proxy"
  start_daemon kube-proxy "$K8S_BIN/kube-proxy" --config="$STATE/kube-proxy-config.yaml"
fi

# ---------------------------------------------------------------- kubelet
# See README.md for why each setting is needed on these machines.
cat >"$STATE/kubelet-config.yaml" <<KCFG
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
oomScoreAdj: 0
maxOpenFiles: 20000
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "2%"
  nodefs.inodesFree: "2%"
  imagefs.available: "2%"
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
podCIDR: $POD_CIDR
resolvConf: /etc/resolv.conf
rotateCertificates: false
serializeImagePulls: false
KCFG
if pid_alive kubelet; then
  log "kubelet already running"
else
  start_kubelet
fi
wait_kubelet_ready
# kube-proxy reports healthy once it has synced the rules for this node.
wait_for kube-proxy 60 curl -fsS --max-time 5 http://127.0.0.1:10256/healthz
# Pods in a namespace wait for its default ServiceAccount, which the
# serviceaccount controller creates shortly after the API comes up.
wait_for kube-controller-manager 60 kc -n default get serviceaccount default --request-timeout=10s

log "cluster up in $(( $(date +%s) - started ))s; logs in $LOGDIR, state in $STATE"
kc get nodes -o wide
echo "KUBECONFIG=$ADMIN_KUBECONFIG"
