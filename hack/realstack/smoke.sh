#!/usr/bin/env bash
# Prove the real stack's pieces outside the cluster, with what they ship:
#   1. unpack the nvml-mock image's layer, render nvml-mock's chart with
#      e2e/realstack/nvml-mock-values.yaml, and run the image's own setup.sh
#      in the unpacked rootfs (private mount namespace, chroot) with the
#      chart's ConfigMap at /etc/nvml-mock and the chart's environment, so it
#      lays out /var/lib/nvml-mock under a temporary "host" directory;
#   2. nvidia-smi (Debian's, from the image) lists the profile's GPUs through
#      the driver root alone (the mock finds its config from its own path);
#      an overrides.yaml with used/free bytes changes its reading; a
#      `processes:` entry shows in --query-compute-apps; one /dev/nvidiaN
#      node narrows what it sees to that GPU, as --pass-device-specs does;
#   3. allocwatch --once, told by a fake kubelet that a pod holds GPU 1,
#      publishes into that driver root's overrides.yaml, and nvidia-smi
#      reads the memory the profile implies for one claim on GPU 1 (others
#      idle) and names the pod in its Processes table, then idle everywhere,
#      with no processes, once the pod is gone and it runs again;
#   4. NVIDIA's device plugin passes NVML discovery on that driver root
#      and serves its socket; the kubelet directory it registers with is a
#      private empty one, so no cluster on this machine is touched.
#
#   smoke.sh [--setup-only]
# --setup-only stops after setup.sh, leaving its "host" in $KEEP_HOST (used
# by containerd-smoke.sh). Needs root and unshare(1). PYTHON must have PyYAML
# (the project's venv).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"
PYTHON=${PYTHON:-python3}
VALUES=$REPO_ROOT/e2e/realstack/nvml-mock-values.yaml
QUERY=--query-gpu=index,uuid,memory.used,memory.free,memory.total
MIB=1048576
# eval "$(...)" would hide a failed build: check each before using it.
built=$("$REALSTACK_DIR/nvml-mock-image.sh") || die "nvml-mock-image.sh failed"
eval "$built"
built=$("$REALSTACK_DIR/device-plugin.sh") || die "device-plugin.sh failed"
eval "$built"
HELM=$("$REPO_ROOT/hack/install-helm.sh") || die "install-helm.sh failed"

work=$(mktemp -d)
dp_pid= kubelet_pid=
cleanup() {
  [ -z "$dp_pid" ] || kill -KILL "$dp_pid" 2>/dev/null || true
  [ -z "$kubelet_pid" ] || kill "$kubelet_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
rootfs=$work/rootfs host=${KEEP_HOST:-$work/host}
mkdir -p "$rootfs" "$host" "$work/etc-nvml-mock"
layer=$(tar -xOf "$NVML_MOCK_IMAGE_TAR" manifest.json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)[0]["Layers"][0])')
tar -xOf "$NVML_MOCK_IMAGE_TAR" "$layer" | tar -C "$rootfs" -x
"$HELM" template smoke "$NVML_MOCK_CHART" -f "$VALUES" --set image.tag=smoke |
  "$PYTHON" "$REALSTACK_DIR/render-chart.py" "$work/etc-nvml-mock/config.yaml" >"$work/env"
mapfile -t pod_env < <(echo NODE_NAME=smoke; cat "$work/env")
profile=$work/etc-nvml-mock/config.yaml

# in_pod CMD...: run CMD in the image rootfs as nvml-mock's pod would see it.
in_pod() {
  unshare --mount --fork -- sh -euc '
    rootfs=$1 host=$2 conf=$3; shift 3
    mount --make-rprivate /
    mkdir -p "$rootfs/host" "$rootfs/etc/nvml-mock" "$rootfs/var/lib/nvml-mock" "$host/var/lib/nvml-mock"
    mount --bind "$host" "$rootfs/host"
    mount --bind "$host/var/lib/nvml-mock" "$rootfs/var/lib/nvml-mock"
    mount --bind "$conf" "$rootfs/etc/nvml-mock"
    mount -t proc proc "$rootfs/proc"
    exec chroot "$rootfs" "$@"' in_pod "$rootfs" "$host" "$work/etc-nvml-mock" "$@"
}
smi() { in_pod env -i PATH=/usr/bin:/bin /host/var/lib/nvml-mock/driver/usr/bin/nvidia-smi "$@"; }
check() { if eval "$1"; then log "ok: $2"; else die "FAILED: $2"; fi; }

log "setup.sh (image $NVML_MOCK_IMAGE) with the chart's inputs"
in_pod env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pod_env[@]}" /scripts/setup.sh \
  >"$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; die "setup.sh failed"; }
sed 's/^/  setup.sh: /' "$work/setup.log" >&2
driver=$host/var/lib/nvml-mock/driver
[ "${1:-}" = --setup-only ] && exit 0
ls -l "$driver/usr/lib64/" "$driver/usr/bin/nvidia-smi" "$driver/config/" >&2

mapfile -t uuids < <(sed -n 's/^[[:space:]]*uuid:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}.*/\1/p' "$profile")
read -r total reserved < <(awk '/^device_defaults:/{d=1} d && /total_bytes:/{t=$2} d && /reserved_bytes:/{print t, $2; exit}' "$profile")
gpus=${#uuids[@]}

log "nvidia-smi, idle"
smi "$QUERY" --format=csv,noheader,nounits | tee "$work/idle.csv" >&2
check "[ \$(wc -l <'$work/idle.csv') = $gpus ]" "nvidia-smi lists the profile's $gpus GPUs"
check "[ \"\$(cut -d, -f2 '$work/idle.csv' | tr -d ' ' | paste -sd' ')\" = '${uuids[*]}' ]" "with the profile's UUIDs"
check "! cut -d, -f3 '$work/idle.csv' | grep -vqx ' 0'" "every GPU reads used 0"

used=$((total / 4))
free=$((total - reserved - used))
cat >"$driver/config/overrides.yaml" <<EOF
version: 1
devices:
  "1":
    memory:
      used_bytes: $used
      free_bytes: $free
    processes:
      - {pid: 4242, type: C, name: smoke/train, used_memory_mib: $((used / MIB))}
EOF
log "nvidia-smi after an overrides.yaml for GPU 1 (used $used, free $free bytes)"
smi "$QUERY" --format=csv,noheader,nounits | tee "$work/used.csv" >&2
expect="1, ${uuids[1]}, $((used / MIB)), $((free / MIB)), $((total / MIB))"
check "grep -qx '$expect' '$work/used.csv'" "GPU 1 reads '$expect'"
check "[ \$(grep -c ', 0, ' '$work/used.csv') = $((gpus - 1)) ]" "the other GPUs stay idle"
smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader | tee "$work/apps.csv" >&2
check "grep -qx '${uuids[1]}, 4242, smoke/train, $((used / MIB)) MiB' '$work/apps.csv'" "the processes entry shows in --query-compute-apps"

log "nvidia-smi with only /dev/nvidia1 present (what --pass-device-specs gives a pod)"
mknod -m 666 "$rootfs/dev/nvidia1" c 195 1
smi "$QUERY" --format=csv,noheader,nounits | tee "$work/one.csv" >&2
rm -f "$rootfs/dev/nvidia1"
check "[ \$(wc -l <'$work/one.csv') = 1 ] && grep -q '${uuids[1]}, $((used / MIB)), ' '$work/one.csv'" "a container with one device node sees only that GPU"

log "allocwatch --once on the same driver root, told by a fake kubelet which pod holds GPU 1"
# The fake kubelet is the tests' real gRPC server on a unix socket; the
# expected rows come from the profile through the e2e suite's oracle.
FRACTION=0.5
SMI_QUERY=--query-gpu=uuid,memory.used,memory.free,memory.total
PYTHONPATH=$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
"$PYTHON" -m devtools.podresources --socket "$work/kubelet.sock" --state "$work/kubelet.json" >"$work/kubelet.log" 2>&1 &
kubelet_pid=$!
# kubelet_holds [UUID...]: the fake kubelet's pods: one GPU pod holding UUID..., or none.
kubelet_holds() {
  "$PYTHON" -c 'import json, os, sys
from devtools.podresources import gpu_pod
path, ids = sys.argv[1], sys.argv[2:]
with open(path + ".tmp", "w") as f:
    json.dump({"pods": [gpu_pod("smoke", "train", ids)] if ids else []}, f)
os.replace(path + ".tmp", path)' "$work/kubelet.json" "$@"
}
allocwatch_once() {
  "$PYTHON" -m allocwatch --once --socket "$work/kubelet.sock" --driver-root "$driver" \
    --used-fraction "$FRACTION" >>"$work/allocwatch.log" 2>&1 || { cat "$work/allocwatch.log" >&2; die "allocwatch --once failed"; }
}
# smi_matches LABEL [UUID...]: nvidia-smi's rows equal the expected ones for a claim on UUID...
smi_matches() {
  local label=$1; shift
  smi "$SMI_QUERY" --format=csv,noheader,nounits >"$work/$label.csv"
  "$PYTHON" "$REALSTACK_DIR/expected-smi.py" "$profile" "$FRACTION" "$@" >"$work/$label.expected"
  sed 's/^/  nvidia-smi: /' "$work/$label.csv" >&2
  diff -u "$work/$label.expected" "$work/$label.csv" >&2
}
kubelet_holds "${uuids[1]}"
allocwatch_once
check "smi_matches claimed '${uuids[1]}'" "after allocwatch --once, GPU 1 reads one claim's memory (fraction $FRACTION) and the others idle"
# allocwatch owns `processes` on the GPUs it publishes: the claim's pod replaces
# the hand-written entry, and goes with the claim.
smi --query-compute-apps=gpu_uuid,process_name,used_memory --format=csv,noheader >"$work/apps-claimed.csv"
sed 's/^/  nvidia-smi: /' "$work/apps-claimed.csv" >&2
check "[ \$(wc -l <'$work/apps-claimed.csv') = 1 ] && grep -q '^${uuids[1]}, smoke/train/main, ' '$work/apps-claimed.csv'" "the Processes table names the claiming pod on GPU 1, and nothing else"
kubelet_holds
allocwatch_once
check "smi_matches released" "after the pod is gone and allocwatch --once again, every GPU reads idle"
smi --query-compute-apps=gpu_uuid,process_name --format=csv,noheader >"$work/apps-released.csv"
check "[ ! -s '$work/apps-released.csv' ]" "and the Processes table is empty again"
kill "$kubelet_pid"; wait "$kubelet_pid" 2>/dev/null || true; kubelet_pid=
sed 's/^/  allocwatch: /' "$work/allocwatch.log" >&2

# run_plugin LABEL [FLAG...]: start the device plugin on the driver root with a
# private, empty kubelet directory, wait for its socket, and list what it
# advertises into $work/LABEL.txt.
run_plugin() {
  local label=$1 dir=$work/$1/device-plugins; shift
  mkdir -p "$dir"
  # unshare ignores SIGTERM while it waits; its SIGKILL takes the plugin along.
  unshare --mount --fork --kill-child -- sh -euc '
    mount --make-rprivate /
    if [ -d /var/lib/kubelet ]; then mount -t tmpfs tmpfs /var/lib/kubelet; else mount -t tmpfs tmpfs /var/lib; fi
    mkdir -p /var/lib/kubelet/device-plugins
    mount --bind "$1" /var/lib/kubelet/device-plugins
    shift
    exec "$@"' dp "$dir" "$DEVICE_PLUGIN_BIN" --nvidia-driver-root="$driver" --driver-root-ctr-path="$driver" \
    --device-discovery-strategy=nvml --pass-device-specs=true "$@" >"$work/$label.log" 2>&1 &
  dp_pid=$!
  local deadline=$((SECONDS + 60))
  until [ -S "$dir/nvidia-gpu.sock" ] || [ $SECONDS -ge $deadline ] || ! kill -0 "$dp_pid" 2>/dev/null; do sleep 0.5; done
  grep -v '^ \|^[{}]' "$work/$label.log" | sed 's/^/  device-plugin: /' >&2
  check "[ -S '$dir/nvidia-gpu.sock' ]" "the device plugin ($label) passed NVML discovery and serves nvidia-gpu.sock"
  PYTHONPATH=$REPO_ROOT "$PYTHON" "$REALSTACK_DIR/plugin-devices.py" "$dir/nvidia-gpu.sock" | tee "$work/$label.txt" >&2
  kill -KILL "$dp_pid"; wait "$dp_pid" 2>/dev/null || true; dp_pid=
}
advertised() { awk '$1 == "device" && $3 == "Healthy" {print $2}' "$work/$1.txt" | sort | paste -sd' '; }

log "device plugin $DEVICE_PLUGIN_BIN on the driver root"
run_plugin plain
check "[ \"\$(advertised plain)\" = '${uuids[*]}' ]" "it advertises the profile's UUIDs, healthy, as nvidia.com/gpu"
check "grep -Eq '^devspec /dev/nvidia[0-9]+ $driver/dev/nvidia[0-9]+\$' '$work/plain.txt'" \
  "Allocate passes the GPU's device node from the driver root (--pass-device-specs)"

log "device plugin with e2e/realstack/device-plugin-timeslicing.yaml's config"
"$PYTHON" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["config.yaml"])' \
  "$REPO_ROOT/e2e/realstack/device-plugin-timeslicing.yaml" >"$work/timeslicing.yaml"
run_plugin timeslicing --config-file="$work/timeslicing.yaml"
shared=$(for u in "${uuids[@]}"; do echo "$u::0"; echo "$u::1"; done | sort | paste -sd' ')
check "[ \"\$(advertised timeslicing)\" = '$shared' ]" "time-slicing advertises <UUID>::0 and <UUID>::1 for every GPU"
log "all checks passed"
