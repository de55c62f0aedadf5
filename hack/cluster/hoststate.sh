# The machine-wide state the cluster adds outside its own directories, and
# its removal. Sourced by up.sh and down.sh after lib.sh, not run.
# shellcheck shell=bash
#
# The kubelet makes iptables chains in several tables and in both families
# (KUBE-FIREWALL with its INPUT/OUTPUT jumps and DROP rule, KUBE-KUBELET-CANARY,
# KUBE-IPTABLES-HINT), the CNI plugins make CNI-* chains, and the kubelet and
# our dockerd make top-level cgroups (kubepods, docker). cluster-up records the
# machine's state before it starts anything; cluster-down removes what is new
# since and ours by name, then fails if anything at all is new. Removing
# everything new was rejected: a Docker of the machine's own that started in
# between would lose its rules. ALLOCWATCH_CGROUP_ROOT puts the cgroup tree
# elsewhere (tests/infra/test_teardown.py uses a directory).
#
# The root mount is made shared, as systemd makes it on every host and kind's
# entrypoint on its nodes: on these machines (no systemd as PID 1) it is
# private, and containerd refuses a hostPath volume with mountPropagation
# HostToContainer or Bidirectional on a private mount ("path ... is mounted on
# "/" but it is not a shared or slave mount"), as NVIDIA's DRA driver's chart
# mounts nvml-mock's driver root. Only the root mount changes, not the mounts
# under it; cluster-down makes it private again when it was.
#
# The real stack's pods also leave files on the host (nvml-mock's driver root,
# its CDI specs, the /run/nvidia/driver link, the node-feature-discovery
# directory its hostPath creates) and containerd 2.x its NRI socket directory:
# of HOST_PATHS, those that did not exist at cluster-up are removed.

HOST_BEFORE=$STATE/host-before        # iptables.save, ip6tables.save, cgroups
OUR_CHAINS='^(KUBE|CNI)-'
OUR_CGROUPS='^(kubepods|kubepods\.slice|docker)$'
IPT_FAMILIES="iptables ip6tables"
CGROUP_ROOT=${ALLOCWATCH_CGROUP_ROOT:-/sys/fs/cgroup}
# Files before the directories that hold them.
HOST_PATHS=${ALLOCWATCH_HOST_PATHS:-/run/cdi/nvidia.yaml /run/cdi/nvml-mock-nri.yaml /run/nvidia/driver \
/var/lib/nvml-mock /run/cdi /run/nvidia /run/nri /etc/kubernetes}

# host_save FAMILY: FAMILY-save's output, empty when the tool is missing.
host_save() {
  command -v "$1-save" >/dev/null 2>&1 || return 0
  "$1-save" 2>/dev/null
}

# host_rules: a save on stdin as "table line" rows without comments, counters
# and tables that hold nothing (no rules, no user chains, every policy ACCEPT),
# which iptables-legacy lists once their module is loaded.
host_rules() {
  awk '
    /^#/ || /^COMMIT/ { next }
    /^\*/ { table = substr($0, 2); order[++n] = table; next }
    /^:/ {
      chain = substr($1, 2)
      if ($2 == "-") { rows[table] = rows[table] table " -N " chain "\n"; used[table] = 1 }
      else {
        rows[table] = rows[table] table " -P " chain " " $2 "\n"
        if ($2 != "ACCEPT") used[table] = 1
      }
      next
    }
    { rows[table] = rows[table] table " " $0 "\n"; used[table] = 1 }
    END { for (i = 1; i <= n; i++) if (used[order[i]]) printf "%s", rows[order[i]] }
  '
}

# host_cgroups: the top-level cgroup of every hierarchy, one path a line.
host_cgroups() {
  local h
  if [ -f "$CGROUP_ROOT/cgroup.controllers" ]; then
    find "$CGROUP_ROOT" -mindepth 1 -maxdepth 1 -type d
  else
    for h in "$CGROUP_ROOT"/*/; do
      [ -L "${h%/}" ] || find "$h" -mindepth 1 -maxdepth 1 -type d
    done
  fi | sed 's#//*#/#g' | sort
}

# host_record: save the machine's state, once, while nothing of ours runs.
host_record() {
  [ -d "$HOST_BEFORE" ] && return 0
  local f
  for f in "$RUNDIR"/*.pid; do
    if [ -e "$f" ] && pid_alive "$(basename "$f" .pid)"; then
      log "components already running and no host state recorded: cluster-down can only remove what is ours by name"
      return 0
    fi
  done
  mkdir -p "$HOST_BEFORE.tmp"
  local fam
  for fam in $IPT_FAMILIES; do host_save "$fam" >"$HOST_BEFORE.tmp/$fam.save"; done
  host_cgroups >"$HOST_BEFORE.tmp/cgroups"
  host_paths >"$HOST_BEFORE.tmp/paths"
  host_root_propagation >"$HOST_BEFORE.tmp/root-propagation"
  rm -rf "$HOST_BEFORE"; mv "$HOST_BEFORE.tmp" "$HOST_BEFORE"
}

# host_added FAMILY: the rows of FAMILY's rules that are not in the record
# (all of them when nothing was recorded).
host_added() {
  local before=/dev/null
  [ -f "$HOST_BEFORE/$1.save" ] && before=$HOST_BEFORE/$1.save
  comm -13 <(host_rules <"$before" | sort) <(host_save "$1" | host_rules | sort)
}

# host_clean_iptables FAMILY: remove the added jumps to our chains from the
# chains that were there before, then flush and delete our added chains; last,
# with nftables, delete a table that was not there before and is empty now.
host_clean_iptables() {
  local fam=$1 added table verb chain rest
  command -v "$fam" >/dev/null 2>&1 || return 0
  added=$(host_added "$fam")
  [ -n "$added" ] || return 0
  declare -A new_chain=()
  while read -r table verb chain rest; do
    [ "$verb" = -N ] && new_chain[$table/$chain]=1
  done <<<"$added"
  while read -r table verb chain rest; do
    [ "$verb" = -A ] && [ -z "${new_chain[$table/$chain]:-}" ] || continue
    [[ " $rest " =~ \ -[jg]\ (KUBE|CNI)- ]] || continue
    # iptables-save quotes comments shell-style, hence eval.
    eval "$fam -t $table -D $chain $rest" 2>/dev/null || log "could not delete from $fam $table: -A $chain $rest"
  done <<<"$added"
  for verb in -F -X; do
    for chain in "${!new_chain[@]}"; do
      [[ ${chain#*/} =~ $OUR_CHAINS ]] || continue
      "$fam" -t "${chain%%/*}" "$verb" "${chain#*/}" 2>/dev/null || log "$fam -t ${chain%%/*} $verb ${chain#*/} failed"
    done
  done
  host_drop_empty_tables "$fam"
}

# host_drop_empty_tables FAMILY: iptables-nft leaves a table it created with
# its built-in chains once the last rule is gone; a table that holds nothing
# now and was not in the record goes, so that the save matches the record.
host_drop_empty_tables() {
  local fam=$1 nft_family=ip table
  [ "$fam" = ip6tables ] && nft_family=ip6
  command -v nft >/dev/null 2>&1 && "$fam" -V 2>/dev/null | grep -q nf_tables || return 0
  [ -f "$HOST_BEFORE/$fam.save" ] || return 0
  for table in $(host_save "$fam" | sed -n 's/^\*//p'); do
    grep -qx "\*$table" "$HOST_BEFORE/$fam.save" && continue
    host_save "$fam" | awk -v t="$table" '/^\*/ {in_t = ($0 == "*" t)} in_t' | host_rules | grep -q . && continue
    nft delete table "$nft_family" "$table" 2>/dev/null || log "could not delete the empty $nft_family $table table"
  done
}

# host_clean_cgroups: our top-level cgroups that are new, deepest first;
# rmdir removes only empty cgroups, so nothing alive is touched.
host_clean_cgroups() {
  local d
  while read -r d; do
    [[ $(basename "$d") =~ $OUR_CGROUPS ]] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done < <(host_new_cgroups)
}

# host_new_cgroups: top-level cgroups not in the record (without a record,
# those named as ours).
host_new_cgroups() {
  if [ -f "$HOST_BEFORE/cgroups" ]; then
    comm -13 "$HOST_BEFORE/cgroups" <(host_cgroups)
  else
    host_cgroups | while read -r d; do
      if [[ $(basename "$d") =~ $OUR_CGROUPS ]]; then echo "$d"; fi
    done
  fi
}

# host_paths: the HOST_PATHS that exist (a dangling link counts), one a line.
host_paths() {
  local p
  for p in $HOST_PATHS; do
    if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi
  done
}

# host_new_paths: HOST_PATHS that exist now and did not at cluster-up, in
# HOST_PATHS' order (nothing without a record).
host_new_paths() {
  [ -f "$HOST_BEFORE/paths" ] || return 0
  host_paths | grep -vxF -f "$HOST_BEFORE/paths" || true
}

# host_clean_paths: remove the new HOST_PATHS, never crossing into a mount.
host_clean_paths() {
  local p
  while read -r p; do
    [ -n "$p" ] || continue
    rm -rf --one-file-system "$p" || log "could not remove $p"
  done < <(host_new_paths)
}

# host_root_propagation: the root mount's propagation (private, shared, ...).
host_root_propagation() { findmnt -no PROPAGATION /; }

# host_share_root: make the root mount shared unless it is shared or a slave.
host_share_root() {
  case $(host_root_propagation) in
    *shared* | *slave*) ;;
    *) log "making the root mount shared (mountPropagation needs it)"; mount --make-shared / ;;
  esac
}

# host_restore_root: the root mount private again when the record says it was.
host_restore_root() {
  [ -f "$HOST_BEFORE/root-propagation" ] && [ "$(cat "$HOST_BEFORE/root-propagation")" = private ] ||
    return 0
  [ "$(host_root_propagation)" = private ] || mount --make-private /
}

# host_leftovers: what is still new against the record, one item a line (with
# no record: our chains and cgroups by name). Empty when the machine is back.
host_leftovers() {
  local fam
  for fam in $IPT_FAMILIES; do
    if [ -f "$HOST_BEFORE/$fam.save" ]; then
      host_added "$fam" | sed "s/^/$fam -t /"
    else
      host_added "$fam" | awk -v re="$OUR_CHAINS" '$3 ~ re || $0 ~ " -j (KUBE|CNI)-"' | sed "s/^/$fam -t /"
    fi
  done
  host_new_cgroups | sed 's/^/cgroup /'
  host_new_paths | sed 's/^/path /'
  if [ -f "$HOST_BEFORE/root-propagation" ] &&
    [ "$(host_root_propagation)" != "$(cat "$HOST_BEFORE/root-propagation")" ]; then
    echo "root mount $(host_root_propagation), was $(cat "$HOST_BEFORE/root-propagation")"
  fi
}
