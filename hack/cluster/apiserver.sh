#!/usr/bin/env bash
# Stop or start the local cluster's API server, for tests of what a node does
# while it is away: `stop` SIGTERMs it (the kubelet and its pods keep running),
# `start` starts it again with up.sh's flags and waits until it is ready and
# the node is Ready again (its status went unreported meanwhile).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"
[ -f "$PKI/apiserver.crt" ] || die "no cluster PKI: run make cluster-up first"
lock_state
case "${1:-}" in
  stop)
    stop_pid kube-apiserver
    ! pid_alive kube-apiserver || die "kube-apiserver survived SIGKILL"
    ;;
  start)
    if pid_alive kube-apiserver; then log "kube-apiserver already running"; else start_apiserver; fi
    log "waiting for node $NODE_NAME to be Ready"
    wait_for kubelet 180 node_ready
    ;;
  *) die "usage: $0 stop|start" ;;
esac
