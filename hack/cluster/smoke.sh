#!/usr/bin/env bash
# Smoke test of the local cluster (after cluster-up; root):
#   1. a pod from the locally built busybox image runs and its logs are readable
#   2. a DaemonSet schedules onto the node, and `kubectl exec` into it works
#   3. a trivial device plugin (smoke_device_plugin.py, a host process run with
#      $PYTHON) registers through /var/lib/kubelet/device-plugins/kubelet.sock;
#      node allocatable shows its resource, a pod requesting it runs, and the
#      pod-resources List reports the pod's device ids (the same ids the
#      plugin's Allocate handed to the container)
# Everything it creates is removed on exit; any failure exits non-zero.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PYTHON=${PYTHON:-python3}
NS=allocwatch-smoke
RESOURCE=smoke.allocwatch.local/dev
started=$(date +%s)

[ "$(id -u)" = 0 ] || die "run as root (the device-plugin and pod-resources sockets are root-only)"
[ -f "$ADMIN_KUBECONFIG" ] || die "no cluster: run make cluster-up first"
# shellcheck disable=SC1091
[ -f "$STATE/images.env" ] && . "$STATE/images.env"
[ -n "${BUSYBOX_IMAGE:-}" ] || die "BUSYBOX_IMAGE missing from $STATE/images.env: run make cluster-up"
"$PYTHON" -c 'import grpc, allocwatch.kubeletapi' 2>/dev/null \
  || die "$PYTHON cannot import grpc and allocwatch: run with PYTHON=<project venv python>"

plugin_pid=
cleanup() {
  local rc=$?
  if [ -n "$plugin_pid" ] && kill -0 "$plugin_pid" 2>/dev/null; then
    kill -TERM "$plugin_pid" 2>/dev/null || true
    wait "$plugin_pid" 2>/dev/null || true
  fi
  kc delete namespace "$NS" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1 || true
  if [ "$rc" = 0 ]; then log "smoke passed in $(( $(date +%s) - started ))s"
  else log "smoke FAILED (exit $rc)"; fi
}
trap cleanup EXIT

# fail MSG: print what the cluster knows about the namespace, then die.
fail() {
  kc -n "$NS" get pods,daemonsets -o wide >&2 || true
  kc -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
  show_log kubelet
  [ -z "$plugin_pid" ] || show_log smoke-device-plugin
  die "$*"
}
# poll TIMEOUT MSG CMD...: until CMD succeeds, or fail with MSG.
poll() {
  local timeout=$1 msg=$2; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$msg (after ${timeout}s)"
    sleep 1
  done
}
phase_is() { [ "$(kc -n "$NS" get pod "$1" -o jsonpath='{.status.phase}')" = "$2" ]; }

kc create namespace "$NS" >/dev/null
poll 60 "no default ServiceAccount in $NS" kc -n "$NS" get serviceaccount default

# ---------------------------------------------------------------- 1. pod + logs
log "1/3 busybox pod from $BUSYBOX_IMAGE"
kc -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  restartPolicy: Never
  containers:
  - name: hello
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "echo hello from \$(hostname) on busybox"]
YAML
poll 60 "pod hello did not succeed" phase_is hello Succeeded
out=$(kc -n "$NS" logs hello)
[ "$out" = "hello from hello on busybox" ] || fail "unexpected log from pod hello: '$out'"
log "    logs: $out"

# ---------------------------------------------------------------- 2. DaemonSet
log "2/3 DaemonSet"
kc -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: smoke-ds}
spec:
  selector: {matchLabels: {app: smoke-ds}}
  template:
    metadata: {labels: {app: smoke-ds}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: sleep
        image: $BUSYBOX_IMAGE
        imagePullPolicy: Never
        command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
YAML
ds_ready() { [ "$(kc -n "$NS" get ds smoke-ds -o jsonpath='{.status.numberReady}')" = 1 ]; }
poll 90 "DaemonSet smoke-ds not ready on the node" ds_ready
ds_pod=$(kc -n "$NS" get pods -l app=smoke-ds -o jsonpath='{.items[0].metadata.name}')
node=$(kc -n "$NS" get pod "$ds_pod" -o jsonpath='{.spec.nodeName}')
[ "$node" = "$NODE_NAME" ] || fail "DaemonSet pod on '$node', expected $NODE_NAME"
out=$(kc -n "$NS" exec "$ds_pod" -- sh -c 'echo exec-ok') || fail "kubectl exec into $ds_pod failed"
[ "$out" = exec-ok ] || fail "kubectl exec returned '$out'"
log "    $ds_pod ready on $node; exec works"

# ---------------------------------------------------------------- 3. device plugin
log "3/3 device plugin $RESOURCE"
plugin_log=$LOGDIR/smoke-device-plugin.log
(cd "$REPO_ROOT" && PYTHONPATH=$REPO_ROOT exec "$PYTHON" hack/cluster/smoke_device_plugin.py serve \
  --resource "$RESOURCE" --devices 2) >"$plugin_log" 2>&1 &
plugin_pid=$!
allocatable() {
  [ "$(kc get node "$NODE_NAME" -o jsonpath="{.status.allocatable.${RESOURCE//./\\.}}")" = 2 ]
}
poll 60 "node allocatable never showed $RESOURCE=2" allocatable
log "    node allocatable $RESOURCE=2"
kc -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: consumer}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: consumer
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    resources:
      limits: {$RESOURCE: 1}
YAML
poll 60 "pod consumer requesting $RESOURCE did not run" phase_is consumer Running
ids=$(cd "$REPO_ROOT" && PYTHONPATH=$REPO_ROOT "$PYTHON" hack/cluster/smoke_device_plugin.py list \
  "$NS" consumer --resource "$RESOURCE") || fail "pod-resources List reports no $RESOURCE ids for consumer"
# shellcheck disable=SC2016  # expanded by the container's shell
env_ids=$(kc -n "$NS" exec consumer -- sh -c 'echo "$SMOKE_DEVICES"') || fail "no SMOKE_DEVICES in consumer"
[ "$(echo "$ids" | wc -l)" = 1 ] || fail "expected 1 device id, pod-resources reports: $ids"
[ "$ids" = "$env_ids" ] || fail "pod-resources ids '$ids' differ from the allocated '$env_ids'"
log "    pod-resources List: consumer has $RESOURCE $ids"
