#!/usr/bin/env bash
# Stop the local cluster and undo what cluster-up and cluster-images did to the
# machine, leaving the caches (and containerd's imported images) in place:
#   1. delete every workload and pod through the API, so the kubelet stops the
#      sandboxes properly (CNI teardown, volume unmounts);
#   2. stop each process we started, by pid file only (SIGTERM, up to 20 s,
#      then SIGKILL);
#   3. remove leftovers a killed kubelet/containerd may leave: containers,
#      mounts under /var/lib/kubelet, /run/netns/cni-* and containerd's run
#      dir, the cni0 bridge, IP leases, and what is new since cluster-up in
#      iptables/ip6tables (KUBE-*, CNI-*), the cgroups (kubepods, docker) and
#      the host paths the real stack's pods write, and the root mount private
#      again if it was (hoststate.sh);
#   4. remove the etcd data and kubelet state, so the next cluster-up starts
#      from an empty API;
#   5. fail if a process, mount, cni0, or anything new in iptables, ip6tables
#      or the cgroups is left.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hoststate.sh"

[ "$(id -u)" = 0 ] || die "run as root"
bin_dirs
lock_state

# containerd's socket and directories are Debian's defaults, which another
# containerd (Docker's, say) would use too; its shims, mounts and CNI chains
# are only touched when this harness ran a containerd or a pod network here.
ours_containerd=false ours_network=false
[ -f "$RUNDIR/containerd.pid" ] && ours_containerd=true
if [ -n "$(ls "$RUNDIR"/*.pid 2>/dev/null)" ] || ip link show cni0 >/dev/null 2>&1; then
  ours_network=true
fi

# --------------------------------------------------------------- 1. workloads
if pid_alive kube-apiserver && apiserver_ok >/dev/null 2>&1; then
  log "deleting workloads and pods"
  kc delete daemonsets,deployments,replicasets,statefulsets,jobs,pods --all --all-namespaces \
    --wait=false >/dev/null 2>&1 || true
  if pid_alive kubelet; then
    for _ in $(seq 1 60); do
      [ -z "$(kc get pods -A -o name 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  kc delete pods --all --all-namespaces --force --grace-period=0 >/dev/null 2>&1 || true
  # The kubelet stops a deleted pod's sandbox (and tears its network down)
  # right after the pod object is gone; wait for the running tasks to go.
  if pid_alive kubelet && pid_alive containerd; then
    for _ in $(seq 1 30); do
      [ -z "$(ctr -n k8s.io tasks ls -q 2>/dev/null)" ] && break
      sleep 1
    done
  fi
fi

# --------------------------------------------------------------- 2. processes
for name in kube-proxy kube-controller-manager kube-scheduler kubelet kube-apiserver etcd dockerd; do
  stop_pid "$name"
done

restore_sysctls

# Containers left behind (e.g. the API was already down): kill and delete them
# while containerd still runs. Their network is cleaned up below.
if pid_alive containerd; then
  for ns in k8s.io moby; do
    for id in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr -n "$ns" containers ls -q 2>/dev/null); do
      ctr -n "$ns" containers delete "$id" >/dev/null 2>&1 || true
    done
  done
fi
stop_pid containerd

# Shims are containerd's children but outlive it by design. Only shims bound to
# our containerd's socket are ours; any left now belong to killed containers.
if $ours_containerd; then
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    case $cmd in
      *containerd-shim*"-address $CONTAINERD_SOCK "*)
        log "killing leftover shim ${p#/proc/}"; kill -KILL "${p#/proc/}" 2>/dev/null || true ;;
    esac
  done
else
  log "no containerd of ours was recorded: leaving containerd's shims and mounts alone"
fi

# --------------------------------------------------------------- 3. leftovers
# Unmount deepest first: pod volumes, sandbox netns and shm, task rootfs, and
# last the kubelet's bind mount of its own root dir (it makes /var/lib/kubelet
# a shared mount point so volume mounts propagate).
ours_mounts="^(/var/lib/kubelet(/|$)|/run/netns/cni-|/run/allocwatch-cluster/|$STATE/"
$ours_containerd && ours_mounts="$ours_mounts|/run/containerd/|/var/lib/containerd/"
mapfile -t mounts < <(findmnt -rn -o TARGET | grep -E "$ours_mounts)" | sort -r)
for m in "${mounts[@]}"; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
done
rm -f /run/netns/cni-*

if ip link show cni0 >/dev/null 2>&1; then
  log "removing bridge cni0"
  ip link delete cni0
fi

# iptables and ip6tables (every table) and top-level cgroups: what is new
# since cluster-up's record and ours by name (hoststate.sh). Without a record
# (a cluster started before records were kept) only when a cluster of ours
# ran here, by name alone.
ours_host=$ours_network
{ [ -d "$HOST_BEFORE" ] || [ -f "$STATE/kubelet-config.yaml" ]; } && ours_host=true
if $ours_host; then
  for fam in $IPT_FAMILIES; do host_clean_iptables "$fam"; done
else
  log "no cluster of ours was recorded: leaving iptables and cgroups alone"
fi

rm -rf /var/lib/cni/networks/k8s-pod-network /var/lib/cni/results/k8s-pod-network-*
rm -f /etc/cni/net.d/10-k8s-bridge.conflist

# Empty cgroups the kubelet (kubepods) and our dockerd (docker) leave when
# they stop; files the real stack's pods left.
if $ours_host; then host_clean_cgroups; host_clean_paths; host_restore_root; fi

# --------------------------------------------------------------- 4. state
if findmnt -rn -o TARGET | grep -qE '^/var/lib/kubelet(/|$)'; then
  log "mounts remain under /var/lib/kubelet; keeping it"
else
  rm -rf --one-file-system /var/lib/kubelet
fi
rm -rf "$STATE/etcd" /var/log/pods /var/log/containers

# --------------------------------------------------------------- report
left=""
for f in "$RUNDIR"/*.pid; do [ -e "$f" ] && pid_alive "$(basename "$f" .pid)" && left="$left $(basename "$f" .pid)"; done
[ -z "$left" ] || die "still running:$left"
ip link show cni0 >/dev/null 2>&1 && die "cni0 still present"
if findmnt -rn -o TARGET | grep -qE '^(/var/lib/kubelet(/|$)|/run/netns/cni-)'; then
  die "mounts remain: $(findmnt -rn -o TARGET | grep -E '^(/var/lib/kubelet(/|$)|/run/netns/cni-)' | tr '\n' ' ')"
fi
if $ours_host; then
  leftovers=$(host_leftovers)
  [ -z "$leftovers" ] || die "left on the machine since cluster-up (record in $HOST_BEFORE):
$leftovers"
fi
rm -rf "$HOST_BEFORE"
log "cluster down; caches kept in $CACHE, logs in $LOGDIR"
