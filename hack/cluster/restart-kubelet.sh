#!/usr/bin/env bash
# Restart the local cluster's kubelet the way `systemctl restart kubelet` would:
# SIGTERM (its pods keep running), start it again with the same flags, and
# wait until it is healthy and the node is Ready. The restarted kubelet
# re-creates /var/lib/kubelet/device-plugins/kubelet.sock and removes the
# plugins' sockets, so device plugins must register again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"
[ -f "$STATE/kubelet-config.yaml" ] || die "no kubelet config: run make cluster-up first"
started=$(date +%s)
lock_state
stop_pid kubelet
! pid_alive kubelet || die "the old kubelet survived SIGKILL; not starting a second one"
start_kubelet
wait_kubelet_ready
log "kubelet restarted in $(( $(date +%s) - started ))s"
