# The machine-wide state kind on nerdctl changes, its record, removal and
# check. Sourced by up.sh and down.sh after lib.sh, not run.
# shellcheck shell=bash
#
# The local cluster's record (../cluster/hoststate.sh: iptables, ip6tables,
# top-level cgroups, host paths) with kind's names: nerdctl's chains are
# CNI-* too; its containers live under the cgroup named after its namespace,
# our dockerd's builds under docker; runc shims keep their state under
# /run/containerd/runc/<namespace> whatever containerd's state directory; and
# up.sh makes /lib/modules, which kind mounts into its nodes, where the
# machine has none. Three records are added, since a kind node is a
# privileged container with no cgroup namespace here:
#   - network links: nerdctl's bridge for the kind network and its veths;
#   - sysctls, which a node's kubelet and systemd write VM-wide
#     (vm.overcommit_memory, kernel.panic, ...), and the bridge plugin
#     net.ipv4.ip_forward;
#   - which v1 controllers have a hierarchy (/proc/cgroups): a hierarchy that
#     a node's systemd mounts for a controller the host has not mounted is
#     machine-wide, and kept alive by any cgroup left in it.

ALLOCWATCH_HOST_PATHS=${ALLOCWATCH_HOST_PATHS:-/run/containerd/runc/$CONTAINERD_NAMESPACE \
/run/containerd/runc/moby /run/containerd/runc /run/containerd /var/lib/cni/networks /var/lib/cni \
/lib/modules}
# shellcheck source=hack/cluster/hoststate.sh
. "$KIND_DIR/../cluster/hoststate.sh"
OUR_CGROUPS="^($CONTAINERD_NAMESPACE|docker)\$"
# nerdctl's bridges are br-<12 hex>; nerdctl0 is its default network's.
OUR_LINKS='^(br-[0-9a-f]{12}|nerdctl[0-9]*|veth[0-9a-z]+)$'
# Writable sysctls that change on their own (counters, random values).
SYSCTL_NOISE='^/proc/sys/(kernel/(ns_last_pid|random/.*)|fs/pipe-keep)$'
host_controllers() { awk 'NR > 1 {print $1, ($2 == 0 ? "unbound" : "bound")}' /proc/cgroups | sort; }
host_links() { ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort; }
# host_sysctls: "<path under /proc/sys><TAB><value>" for every writable sysctl,
# the lines of a value joined by \036.
host_sysctls() {
  find /proc/sys -type f -perm -u+w 2>/dev/null | grep -Ev "$SYSCTL_NOISE" | tr '\n' '\0' |
    { xargs -0 grep -H '' 2>/dev/null || true; } |
    awk '{i = index($0, ":"); k = substr($0, 11, i - 11); v = substr($0, i + 1)
          val[k] = (k in val) ? val[k] "\036" v : v}
         END {for (k in val) print k "\t" val[k]}' | LC_ALL=C sort
}

# kind_host_record: the local cluster's record, then links, controllers and
# sysctls, once, while nothing of ours runs.
kind_host_record() {
  [ -d "$HOST_BEFORE" ] && return 0
  host_record
  [ -d "$HOST_BEFORE" ] || return 0
  host_links >"$HOST_BEFORE/links"
  host_controllers >"$HOST_BEFORE/controllers"
  host_sysctls >"$HOST_BEFORE/sysctls"
}

# host_new_links: links that were not there at the record.
host_new_links() {
  [ -f "$HOST_BEFORE/links" ] || return 0
  comm -13 "$HOST_BEFORE/links" <(host_links)
}

# host_new_hierarchies: "<id> <controllers>" for each v1 hierarchy that holds
# controllers which had none at the record.
host_new_hierarchies() {
  [ -f "$HOST_BEFORE/controllers" ] || return 0
  awk 'FNR == NR {was[$1] = $2; next}
       FNR > 1 && $2 != 0 && was[$1] == "unbound" {h[$2] = ($2 in h) ? h[$2] "," $1 : $1}
       END {for (i in h) print i, h[i]}' "$HOST_BEFORE/controllers" /proc/cgroups
}

# host_clean_hierarchies: a new hierarchy goes once it has no cgroup but its
# root and no mount: it is mounted here, emptied deepest first, and let go,
# again while it stays (an unmount while the kernel still releases removed
# cgroups keeps the hierarchy).
host_clean_hierarchies() {
  local id ctrls d
  while read -r id ctrls; do
    [ -n "$id" ] || continue
    if findmnt -rn -t cgroup -o OPTIONS | tr ',' '\n' | grep -qxF "${ctrls%%,*}"; then
      log "cgroup hierarchy $ctrls is mounted on the machine: leaving it"; continue
    fi
    for _ in $(seq 1 10); do
      d=$(mktemp -d)
      if mount -t cgroup -o "$ctrls" cgroup "$d"; then
        find "$d" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
        umount "$d"
      fi
      rmdir "$d"
      sleep 0.5
      host_new_hierarchies | grep -q "^$id " || break
    done
  done < <(host_new_hierarchies)
}

# host_changed_sysctls: "<path><TAB><value>" as recorded, for every sysctl
# whose value differs now (those that came or went with a link are not
# compared).
host_changed_sysctls() {
  [ -f "$HOST_BEFORE/sysctls" ] || return 0
  LC_ALL=C join -t "$(printf '\t')" -o 1.1,1.2,2.2 "$HOST_BEFORE/sysctls" <(host_sysctls) |
    awk -F'\t' '$2 != $3 {print $1 "\t" $2}'
}

# kind_host_clean: what the local cluster's clean-up does, then our new
# links go and the changed sysctls get their recorded values back.
kind_host_clean() {
  local fam link key value
  for fam in $IPT_FAMILIES; do host_clean_iptables "$fam"; done
  host_clean_cgroups
  host_clean_hierarchies
  host_clean_paths
  while read -r link; do
    [[ $link =~ $OUR_LINKS ]] || continue
    ip link delete "$link" 2>/dev/null || log "could not delete link $link"
  done < <(host_new_links)
  while IFS=$'\t' read -r key value; do
    [ -n "$key" ] || continue
    log "restoring sysctl $key to $value"
    printf '%s' "$value" | tr '\036' '\n' >"/proc/sys/$key" 2>/dev/null ||
      log "could not restore sysctl $key to $value"
  done < <(host_changed_sysctls)
}

# kind_host_leftovers: everything still new or changed against the record.
kind_host_leftovers() {
  host_leftovers
  host_new_links | sed 's/^/link /'
  host_new_hierarchies | sed 's/^/cgroup hierarchy /'
  host_changed_sysctls | sed 's/^/sysctl (was) /; s/\t/ = /'
}
