# Shared settings and helpers for the hack/cluster scripts. Sourced, not run.
# shellcheck shell=bash disable=SC2034
#
# Three directories hold everything:
#   $CACHE  (ALLOCWATCH_CACHE, default /var/cache/allocwatch): Go module and
#           build caches, built binaries keyed by version, the rootfs tarball
#           and image tarballs. Survives cluster-down.
#   $STATE  (ALLOCWATCH_CLUSTER_STATE, default /var/lib/allocwatch-cluster):
#           PKI, kubeconfigs, component configs, etcd data, pid files.
#   $LOGDIR (ALLOCWATCH_CLUSTER_LOGS, default /var/log/allocwatch-cluster):
#           one <component>.log per daemon.

CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$CLUSTER_DIR/../.." && pwd)
# find_go, log and die
# shellcheck source=hack/common.sh
. "$REPO_ROOT/hack/common.sh"

CACHE=${ALLOCWATCH_CACHE:-/var/cache/allocwatch}
STATE=${ALLOCWATCH_CLUSTER_STATE:-/var/lib/allocwatch-cluster}
LOGDIR=${ALLOCWATCH_CLUSTER_LOGS:-/var/log/allocwatch-cluster}
RUNDIR=$STATE/run   # pid files
PKI=$STATE/pki

# Versions come from the committed go.mod files, so bumping a pin there is
# the only edit needed; the cache key also hashes every build input (see
# inputs_key), so no other edit can reuse a stale build.
K8S_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$CLUSTER_DIR/k8s/go.mod")
ETCD_VERSION=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$CLUSTER_DIR/etcd/go.mod")

NODE_NAME=${ALLOCWATCH_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}
# hack/kind runs its own containerd elsewhere (ALLOCWATCH_CONTAINERD_SOCK).
CONTAINERD_SOCK=${ALLOCWATCH_CONTAINERD_SOCK:-/run/containerd/containerd.sock}
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.0.0.0/24
APISERVER_PORT=6443
ADMIN_KUBECONFIG=$STATE/admin.kubeconfig

# go_env: everything a build needs lives under $CACHE, never under $HOME, and
# the local toolchain is used as is (no toolchain downloads).
# The build's settings, also hashed into its cache key (inputs_key).
GO_BUILD_ENV="GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0"
go_env() {
  GO=$(find_go) || die "no Go toolchain found (need go >= 1.26 on PATH or in /usr/local/go)"
  # shellcheck disable=SC2086  # the words are NAME=value pairs
  export $GO_BUILD_ENV
  export GOMODCACHE=$CACHE/gomod GOCACHE=$CACHE/gocache GOPATH=$CACHE/gopath
  GO_VERSION=$("$GO" env GOVERSION)
  GOOS_ARCH=$("$GO" env GOOS)-$("$GO" env GOARCH)
  K8S_BIN=$CACHE/bin/k8s-$K8S_VERSION-$GO_VERSION-$GOOS_ARCH-$(inputs_key k8s)
  ETCD_BIN=$CACHE/bin/etcd-$ETCD_VERSION-$GO_VERSION-$GOOS_ARCH-$(inputs_key etcd)
}

# inputs_key DIR: a short hash of what a build of DIR reads besides the module
# cache: its go.mod, go.sum and Go files, the flags in build.sh, and the
# build's Go settings.
inputs_key() {
  { echo "$GO_BUILD_ENV"
    cat "$CLUSTER_DIR/$1"/go.mod "$CLUSTER_DIR/$1"/go.sum "$CLUSTER_DIR/$1"/*.go "$CLUSTER_DIR/build.sh"
  } | sha256sum | cut -c1-8
}

# The bin directories are recorded once built so that scripts which only
# run binaries (down.sh, env.sh) need no Go toolchain. The built containerd's
# directory goes first on PATH: its ctr talks to it, and containerd finds its
# own shim there rather than Debian's.
bin_dirs() {
  if [ -f "$STATE/bin.env" ]; then
    # shellcheck disable=SC1091
    . "$STATE/bin.env"
    case ":$PATH:" in *":${CONTAINERD_BIN:-}:"*) ;; *) [ -z "${CONTAINERD_BIN:-}" ] || PATH=$CONTAINERD_BIN:$PATH ;; esac
  fi
}

# apt_mirror SUITE: the Debian mirror the host's apt uses for SUITE (the only
# archive reachable here); DEBIAN_MIRROR overrides it.
apt_mirror() {
  local m
  m=$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
    sed -nE 's#^URIs:[[:space:]]*(http[^ ]*/debian)/?$#\1#p; s#^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?(http[^ ]*/debian)/?[[:space:]]+'"$1"'[[:space:]].*#\2#p' |
    head -1)
  echo "${DEBIAN_MIRROR:-${m:-http://deb.debian.org/debian}}"
}


# show_log NAME: the tail of a component's log, for failure messages.
show_log() {
  local f=$LOGDIR/$1.log
  if [ -f "$f" ]; then
    printf '\n----- last 40 lines of %s -----\n' "$f" >&2
    tail -n 40 "$f" >&2
    printf -- '----- end of %s -----\n' "$f" >&2
  fi
}

# lock_state: serialize up, down, images and kubelet restarts (e.g. a
# `make e2e-local`, which runs cluster-up, next to a manual cluster-down).
# The lock is on fd 9 and released when the script exits; daemons are started
# with fd 9 closed so they never hold it.
lock_state() {
  mkdir -p "$STATE"
  exec 9>"$STATE/.lock"
  if ! flock -n 9; then
    log "waiting for another cluster script to finish (lock $STATE/.lock)"
    flock 9
  fi
}

# proc_start PID: the process's start time in clock ticks since boot (field
# 22 of /proc/PID/stat). With the pid it names one process for good: a pid
# file that outlived its process (a reboot, a crash) cannot match a stranger
# that was given the same pid.
proc_start() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # the fields after the command name, which may hold spaces
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

# pid_of NAME: the pid in $RUNDIR/NAME.pid while that very process lives.
pid_of() {
  local pid start
  [ -f "$RUNDIR/$1.pid" ] || return 1
  read -r pid start <"$RUNDIR/$1.pid" || true
  [ -n "$pid" ] || return 1
  if [ -z "$start" ]; then
    # written before start times were recorded: the pid alone must do
    kill -0 "$pid" 2>/dev/null && echo "$pid"
    return
  fi
  [ "$(proc_start "$pid")" = "$start" ] && echo "$pid"
}

# pid_alive NAME: true when $RUNDIR/NAME.pid names a live process.
pid_alive() {
  pid_of "$1" >/dev/null
}

# start_daemon NAME CMD...: run CMD in the background with its output in
# $LOGDIR/NAME.log and its pid in $RUNDIR/NAME.pid. setsid keeps the daemon
# out of the caller's process group, so a Ctrl-C on make does not kill it.
start_daemon() {
  local name=$1; shift
  mkdir -p "$RUNDIR" "$LOGDIR"
  printf '\n===== %s starting %s\n' "$(date -Is)" "$name" >>"$LOGDIR/$name.log"
  setsid "$@" >>"$LOGDIR/$name.log" 2>&1 </dev/null 9>&- &
  echo "$! $(proc_start $!)" >"$RUNDIR/$name.pid"
}

# wait_for NAME TIMEOUT CMD...: poll CMD every half second until it succeeds;
# fail with NAME's log if it does not within TIMEOUT seconds or NAME dies.
# Each CMD must give up on its own (curl --max-time, kubectl --request-timeout):
# the deadline is checked between probes.
wait_for() {
  local name=$1 timeout=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$RUNDIR/$name.pid" ] && ! pid_alive "$name"; then
      show_log "$name"; die "$name exited"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      show_log "$name"; die "$name not ready after ${timeout}s"
    fi
    sleep 0.5
  done
}

# stop_pid NAME: SIGTERM the process in NAME's pid file, wait up to 20 s,
# then SIGKILL. Only ever signals the process we recorded ourselves (pid and
# start time). The pid file stays while that process survives, so down.sh's
# final check reports it.
stop_pid() {
  local name=$1 pid
  [ -f "$RUNDIR/$name.pid" ] || return 0
  if pid=$(pid_of "$name"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$name" 40; then
      log "$name did not stop in 20 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      if ! wait_gone "$name" 10; then
        log "$name (pid $pid) survived SIGKILL"
        return 0
      fi
    fi
  fi
  rm -f "$RUNDIR/$name.pid"
}

# wait_gone NAME TRIES: poll every half second, TRIES times at most, until
# NAME's process is gone; false if it is still there.
wait_gone() {
  local i
  for i in $(seq 1 "$2"); do
    pid_alive "$1" || return 0
    sleep 0.5
  done
  ! pid_alive "$1"
}

kubectl_bin() {
  bin_dirs
  if [ -n "${K8S_BIN:-}" ] && [ -x "$K8S_BIN/kubectl" ]; then echo "$K8S_BIN/kubectl"
  else command -v kubectl
  fi
}

kc() { "$(kubectl_bin)" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
apiserver_ok() { kc get --raw /readyz --request-timeout=10s; }

# The node's address: the source address of the default route (a route
# lookup only, nothing is sent). The kubelet rejects a loopback node IP, so
# this is the host's primary address; the API server reaches the kubelet on
# it, which stays on this machine.
node_ip() {
  if [ -n "${ALLOCWATCH_NODE_IP:-}" ]; then echo "$ALLOCWATCH_NODE_IP"; return; fi
  local ip
  ip=$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
  [ -n "$ip" ] || ip=$(hostname -I | awk '{print $1}')
  [ -n "$ip" ] || die "cannot determine the node IP; set ALLOCWATCH_NODE_IP"
  echo "$ip"
}

# set_image_env KEY VALUE: record an image reference in $STATE/images.env,
# the file the smoke and e2e tests read.
set_image_env() {
  local f=$STATE/images.env
  mkdir -p "$STATE"; touch "$f"
  sed -i "/^$1=/d" "$f"
  echo "$1=$2" >>"$f"
}

# The kubelet sets these VM-wide at start (protectKernelDefaults: false would
# otherwise refuse to start). Their values from before the first kubelet start
# are saved so cluster-down can put them back.
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
save_sysctls() {
  local f=$STATE/sysctl.orig k v
  [ -f "$f" ] && return 0
  for k in $KUBELET_SYSCTLS; do
    v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
  done >"$f.tmp"
  mv "$f.tmp" "$f"
}
restore_sysctls() {
  local f=$STATE/sysctl.orig
  [ -f "$f" ] || return 0
  # Best effort: a value the kernel refuses must not stop cluster-down.
  if sysctl -q -e -p "$f" >/dev/null; then rm -f "$f"; else log "could not restore every sysctl in $f"; fi
}

# start_kubelet: start the kubelet with the config up.sh wrote. Shared by
# up.sh and restart-kubelet.sh so a restart uses exactly the same flags.
start_kubelet() {
  bin_dirs
  save_sysctls
  log "starting kubelet"
  mkdir -p /var/lib/kubelet
  start_daemon kubelet "$K8S_BIN/kubelet" \
    --config="$STATE/kubelet-config.yaml" \
    --kubeconfig="$STATE/kubelet.kubeconfig" \
    --hostname-override="$NODE_NAME" \
    --node-ip="$(node_ip)" \
    --v=1
}

# start_apiserver: start kube-apiserver and wait until it is ready. Shared by
# up.sh and apiserver.sh so a restart uses exactly the same flags. It listens
# on every address and advertises the node IP, the endpoint of the
# "kubernetes" Service through which pods (nvml-mock's setup.sh labelling its
# node) reach it via kube-proxy, as on a kind node.
start_apiserver() {
  bin_dirs
  log "starting kube-apiserver $K8S_VERSION"
  start_daemon kube-apiserver "$K8S_BIN/kube-apiserver" \
    --bind-address=0.0.0.0 --secure-port="$APISERVER_PORT" --advertise-address="$(node_ip)" \
    --etcd-servers=http://127.0.0.1:2379 \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --profiling=false
  wait_for kube-apiserver 90 apiserver_ok
}

kubelet_ok() { curl -fsS --max-time 5 http://127.0.0.1:10248/healthz; }
node_ready() {
  [ "$(kc get node "$NODE_NAME" --request-timeout=10s -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# wait_kubelet_ready: the kubelet's healthz answers and the node is Ready.
wait_kubelet_ready() {
  wait_for kubelet 60 kubelet_ok
  log "waiting for node $NODE_NAME to be Ready"
  wait_for kubelet 180 node_ready
}
