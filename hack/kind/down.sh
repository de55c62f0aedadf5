#!/usr/bin/env bash
# Undo hack/kind/up.sh and leave the machine as up.sh found it, keeping the
# caches, the loaded node image and the built project images:
#   1. delete every kind cluster on our nerdctl, then the kind network;
#   2. stop our dockerd and containerd, by pid file only (SIGTERM, up to 20 s,
#      then SIGKILL), after killing any container left in their namespaces;
#      then the runc shims bound to our containerd's socket;
#   3. unmount what is left under our directories; remove what is new since
#      up.sh's record and ours by name: iptables chains (CNI-*), cgroups,
#      host paths and links, and put changed sysctls back (hoststate.sh);
#   4. fail if a process, mount, or anything new or changed is left.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$KIND_DIR/hoststate.sh"

[ "$(id -u)" = 0 ] || die "run as root"
mkdir -p "$STATE"
lock_state
kind_path 2>/dev/null || true

# --------------------------------------------------------------- 1. clusters
if pid_alive containerd && command -v kind >/dev/null 2>&1; then
  for cluster in $(kind get clusters 2>/dev/null); do
    log "deleting kind cluster $cluster"
    kind delete cluster --name "$cluster" --kubeconfig "$STATE/kubeconfig" >/dev/null 2>&1 ||
      log "kind delete cluster $cluster failed"
  done
  if nerdctl network inspect kind >/dev/null 2>&1; then
    nerdctl network rm kind >/dev/null || log "could not remove the kind network"
  fi
  nerdctl volume prune -f >/dev/null 2>&1 || true
fi
rm -f "$STATE/kubeconfig"

# --------------------------------------------------------------- 2. processes
stop_pid dockerd
if pid_alive containerd; then
  for ns in "$CONTAINERD_NAMESPACE" moby; do
    for id in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 1
    for id in $(ctr -n "$ns" tasks ls -q 2>/dev/null); do
      ctr -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
    done
  done
fi
stop_pid containerd
for p in /proc/[0-9]*; do
  cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
  case $cmd in
    *containerd-shim*"-address $CONTAINERD_SOCK "*)
      log "killing leftover shim ${p#/proc/}"; kill -KILL "${p#/proc/}" 2>/dev/null || true ;;
  esac
done

# --------------------------------------------------------------- 3. leftovers
ours_mounts="^($STATE/|$KIND_RUN/)"
mapfile -t mounts < <(findmnt -rn -o TARGET | grep -E "$ours_mounts" | sort -r)
for m in "${mounts[@]}"; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
done
if [ -d "$HOST_BEFORE" ]; then
  kind_host_clean
else
  log "no record of the machine from up.sh: leaving iptables, cgroups, links and sysctls alone"
fi
rm -rf "$KIND_RUN"

# --------------------------------------------------------------- 4. report
left=""
for f in "$RUNDIR"/*.pid; do [ -e "$f" ] && pid_alive "$(basename "$f" .pid)" && left="$left $(basename "$f" .pid)"; done
[ -z "$left" ] || die "still running:$left"
if findmnt -rn -o TARGET | grep -qE "$ours_mounts"; then
  die "mounts remain: $(findmnt -rn -o TARGET | grep -E "$ours_mounts" | tr '\n' ' ')"
fi
if [ -d "$HOST_BEFORE" ]; then
  leftovers=$(kind_host_leftovers)
  [ -z "$leftovers" ] || die "left on the machine since up.sh (record in $HOST_BEFORE):
$leftovers"
  rm -rf "$HOST_BEFORE"
fi
log "kind down; caches kept in $CACHE, the node image in $STATE/containerd, logs in $LOGDIR"
