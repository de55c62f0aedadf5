#!/usr/bin/env bash
# Prove the containerd 2.x build (containerd.sh) outside the cluster, beside
# whatever containerd or Docker the machine runs: its own root, state, socket
# and config, all in a temporary directory.
#   1. containerd starts with NRI on and its CRI plugin reports our CDI spec
#      directory (cdi_spec_dirs);
#   2. the nvml-mock image (nvml-mock-image.sh) is imported and run with
#      `ctr run --device nvidia.com/gpu=1` against the CDI spec nvml-mock's
#      setup.sh writes (laid out by smoke.sh's steps, under the temporary
#      directory, so its host paths are rewritten to point there, and its
#      hook to the nvidia-cdi-hook device-plugin.sh builds): nvidia-smi in the
#      container, from the injected mounts alone, sees exactly GPU 1.
# Needs root and unshare(1).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"
bin=$("$REALSTACK_DIR/containerd.sh") || die "containerd.sh failed"
# eval "$(...)" would hide a failed build: check each before using it.
built=$("$REALSTACK_DIR/nvml-mock-image.sh") || die "nvml-mock-image.sh failed"
eval "$built"
built=$("$REALSTACK_DIR/device-plugin.sh") || die "device-plugin.sh failed"
eval "$built"
work=$(mktemp -d)
ctd_pid=
cleanup() {
  if [ -n "$ctd_pid" ]; then
    [ "${KEEP_LOG:-}" = "" ] || cp "$work/containerd.log" "$KEEP_LOG"
    "$bin/ctr" --address "$work/containerd.sock" -n smoke tasks kill -s KILL cdi 2>/dev/null || true
    kill "$ctd_pid" 2>/dev/null || true
    wait "$ctd_pid" 2>/dev/null || true
  fi
  umount -R "$work/root" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ctr_() { "$bin/ctr" --address "$work/containerd.sock" -n smoke "$@"; }
check() { if eval "$1"; then log "ok: $2"; else die "FAILED: $2"; fi; }

mkdir -p "$work/cdi"
cat >"$work/config.toml" <<EOF
version = 3
root = "$work/root"
state = "$work/state"
[grpc]
  address = "$work/containerd.sock"
[ttrpc]
  address = "$work/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.runtime']
  cdi_spec_dirs = ["$work/cdi"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = "$bin/runc"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "$work/nri.sock"
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
EOF
log "containerd $("$bin/containerd" --version | awk '{print $3}'), runc $("$bin/runc" --version | awk 'NR==1{print $3}')"
PATH=$bin:$PATH setsid "$bin/containerd" --config "$work/config.toml" --log-level info >"$work/containerd.log" 2>&1 &
ctd_pid=$!
deadline=$((SECONDS + 60))
until ctr_ version >/dev/null 2>&1 || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
check "ctr_ version >/dev/null" "containerd serves its own socket"
ctr_ plugins ls | grep -E 'cri|nri|cdi' >&2 || true
# CDI is always on in containerd 2.x (1.7's enable_cdi key is gone).
check "grep 'starting cri plugin' '$work/containerd.log' | grep -qF 'cdiSpecDirs\\\":[\\\"$work/cdi\\\"]'" \
  "the CRI plugin runs with our CDI spec directory"
check "[ -S '$work/nri.sock' ]" "NRI listens"

log "the nvml-mock driver root and CDI spec, as setup.sh writes them (smoke.sh's layout)"
host=$work/host
KEEP_HOST=$host "$REALSTACK_DIR/smoke.sh" --setup-only >"$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; die "setup failed"; }
sed -e "s#hostPath: /var/lib/nvml-mock#hostPath: $host/var/lib/nvml-mock#" \
  -e "s#path: /usr/bin/nvidia-cdi-hook#path: $NVIDIA_CDI_HOOK_BIN#" \
  "$host/var/run/cdi/nvidia.yaml" >"$work/cdi/nvidia.yaml"

ctr_ images import "$NVML_MOCK_IMAGE_TAR" >/dev/null
# ctr resolves CDI devices itself, from the default spec directories; give it
# a private /run with ours, so no spec on this machine is read or touched.
unshare --mount --fork -- sh -euc '
  mount --make-rprivate /
  mount -t tmpfs tmpfs /run
  mkdir -p /run/cdi
  cp "$1/cdi/nvidia.yaml" /run/cdi/
  shift
  exec "$@"' cdi "$work" "$bin/ctr" --address "$work/containerd.sock" -n smoke run --rm --fifo-dir "$work/fifo" \
  --device nvidia.com/gpu=1 "$NVML_MOCK_IMAGE" cdi \
  /usr/bin/nvidia-smi --query-gpu=index,uuid,memory.total --format=csv,noheader | tee "$work/cdi.csv" >&2
check "[ \$(wc -l <'$work/cdi.csv') = 1 ] && grep -q ', GPU-00000074-0000-0000-0000-000000000001, ' '$work/cdi.csv'" \
  "a container given nvidia.com/gpu=1 by CDI sees GPU 1 only, through the injected library and config"
log "all checks passed"
