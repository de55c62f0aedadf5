#!/usr/bin/env bash
# The kind node image, assembled with no Docker and no registry from the node
# rootfs (node-rootfs.sh) and the binaries hack/cluster/build.sh builds; prints
#   <tarball> <image reference>
# The tarball is cached as $CACHE/images/kind-node-<k8s>-<key>.tar, and the
# reference is localhost/allocwatch-kind-node:<k8s>-<key>. Added to the rootfs
# as kind's base Dockerfile and `kind build node-image` add them:
#   - containerd, its shim and ctr in /usr/local/bin, runc in /usr/local/sbin,
#     and /etc/containerd/cri-base.json (`ctr oci spec` with kind's
#     product-files hook and no rlimits);
#   - kubeadm, kubelet and kubectl in /usr/bin, and /kind/version;
#   - the images `kubeadm config images list` names, but CoreDNS, imported
#     unpacked into the node's containerd (k8s.io) under those names:
#     kube-apiserver, kube-controller-manager, kube-scheduler and kube-proxy
#     (with the node's legacy iptables), etcd (the etcd build.sh builds, under
#     kubeadm's etcd tag) and a static pause (../cluster/files/pause.c), which
#     containerd's config names as its sandbox image;
#   - ENTRYPOINT entrypoint /sbin/init (after ours, below), container=docker,
#     STOPSIGNAL SIGRTMIN+3.
# And for these machines (files/):
#   - containerd's restrict_oom_score_adj = true: no CAP_SYS_RESOURCE;
#   - the pod network: containerd writes a bridge conflist from
#     cni-template.json with the node's pod CIDR, using Debian's CNI plugins,
#     and kind's default CNI manifest (default-cni.yaml) only records that;
#   - cgroup-v1-entrypoint, run before kind's entrypoint: on a cgroup v1 host
#     the node's systemd sees only the v1 controllers the host has mounted,
#     and the v2 hierarchy from the node's own cgroup down (the script says
#     why), so that nothing the node does reaches the machine's own cgroups.
# CoreDNS is left out (no image is built for it): kubeadm's coredns pods wait
# for their image, and nothing the e2e suite runs resolves cluster names.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root"
bin_dirs
[ -n "${K8S_BIN:-}" ] && [ -x "$K8S_BIN/kubeadm" ] || die "no kubeadm in $STATE/bin.env: run hack/kind/build.sh first"
rootfs_tar=$("$KIND_DIR/node-rootfs.sh")
key=$({ echo "$rootfs_tar $K8S_BIN $ETCD_BIN $CONTAINERD_BIN"
  recipe_key "$0" "$KIND_DIR"/files/* "$MKIMAGE" "$CLUSTER_DIR/files/pause.c"; } | sha256sum | cut -c1-12)
REF=localhost/allocwatch-kind-node:$K8S_VERSION-$key
out=$CACHE/images/kind-node-$K8S_VERSION-$key.tar
if [ -f "$out" ]; then echo "$out $REF"; exit 0; fi

started=$(date +%s)
mkdir -p "$CACHE/images" "$LOGDIR"
work=$(mktemp -d "$CACHE/images/kind-node.XXXXXX")
ctd_pid=
cleanup() {
  if [ -n "$ctd_pid" ]; then kill "$ctd_pid" 2>/dev/null || true; wait "$ctd_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
root=$work/rootfs
mkdir "$root"
tar -C "$root" --numeric-owner -xf "$rootfs_tar"

# ---------------------------------------------------------------- binaries
install -m 0755 "$CONTAINERD_BIN"/containerd "$CONTAINERD_BIN"/containerd-shim-runc-v2 "$CONTAINERD_BIN"/ctr "$root/usr/local/bin/"
install -m 0755 "$CONTAINERD_BIN/runc" "$root/usr/local/sbin/runc"
install -m 0755 "$K8S_BIN"/kubeadm "$K8S_BIN"/kubelet "$K8S_BIN"/kubectl "$root/usr/bin/"
echo "$K8S_VERSION" >"$root/kind/version"
"$CONTAINERD_BIN/ctr" oci spec | python3 -c '
import json, sys
spec = json.load(sys.stdin)
spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
spec["process"].pop("rlimits", None)
json.dump(spec, sys.stdout, indent=2)' >"$root/etc/containerd/cri-base.json"

# ---------------------------------------------------------------- configuration
mapfile -t wanted < <("$K8S_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION")
image_named() { printf '%s\n' "${wanted[@]}" | grep -m1 "/$1:" || die "kubeadm lists no $1 image"; }
PAUSE_REF=$(image_named pause)
cfg=$root/etc/containerd/config.toml
sed -i -e "s#^\(\s*sandbox_image = \).*#\1\"$PAUSE_REF\"#" \
  -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' "$cfg"
cat >>"$cfg" <<'EOF'

# the node's pod network (hack/kind/node-image.sh)
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/cni/net.d"
  conf_template = "/etc/containerd/cni-template.json"
EOF
grep -q "sandbox_image = \"$PAUSE_REF\"" "$cfg" && grep -q 'restrict_oom_score_adj = true' "$cfg" \
  || die "kind's containerd config changed shape: $cfg"
install -m 0644 "$KIND_DIR/files/cni-template.json" "$root/etc/containerd/cni-template.json"
install -D -m 0644 "$KIND_DIR/files/default-cni.yaml" "$root/kind/manifests/default-cni.yaml"
install -m 0755 "$KIND_DIR/files/cgroup-v1-entrypoint" "$root/kind/bin/cgroup-v1-entrypoint"

# ---------------------------------------------------------------- images
imgs=$work/images
mkdir -p "$imgs"
# one_binary NAME BINARY: an image holding BINARY as /usr/local/bin/NAME.
one_binary() {
  mkdir -p "$imgs/$1/usr/local/bin"
  install -m 0755 "$2" "$imgs/$1/usr/local/bin/$1"
  python3 "$MKIMAGE" "$imgs/$1" "$(image_named "$1")" "$imgs/$1.tar" 2>/dev/null
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do one_binary "$c" "$K8S_BIN/$c"; done
one_binary etcd "$ETCD_BIN/etcd"

# kube-proxy must write the tables the kubelet writes. kind's entrypoint
# picks iptables' legacy or nf_tables mode by which already holds more rules
# in the node's network namespace, legacy on a tie; a node nerdctl starts has
# none, so the node runs legacy, and kube-proxy gets the node's legacy
# iptables, copied from the rootfs with the libraries and extensions it loads.
kp=$imgs/kube-proxy
mkdir -p "$kp/usr/local/bin" "$kp/usr/sbin" "$kp/usr/lib/x86_64-linux-gnu" "$kp/usr/lib64" "$kp/etc"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$kp/$d"; done
install -m 0755 "$K8S_BIN/kube-proxy" "$kp/usr/local/bin/kube-proxy"
cp -a "$root/usr/sbin/xtables-legacy-multi" "$kp/usr/sbin/"
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -s xtables-legacy-multi "$kp/usr/sbin/$t"
done
cp -a "$root/usr/lib/x86_64-linux-gnu/xtables" "$kp/usr/lib/x86_64-linux-gnu/"
chroot "$root" sh -c 'ldd /usr/sbin/xtables-legacy-multi /usr/lib/x86_64-linux-gnu/xtables/*.so' |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*[^:]$/ {print $1}' | sort -u |
  while read -r lib; do cp -L "$root$lib" "$kp/usr${lib#/usr}"; done
cp -a "$root"/etc/protocols "$root"/etc/services "$kp/etc/" 2>/dev/null || true
python3 "$MKIMAGE" "$kp" "$(image_named kube-proxy)" "$imgs/kube-proxy.tar" 2>/dev/null

mkdir -p "$imgs/pause"
gcc -Os -static -o "$imgs/pause/pause" "$CLUSTER_DIR/files/pause.c"
strip "$imgs/pause/pause"
python3 "$MKIMAGE" "$imgs/pause" "$PAUSE_REF" "$imgs/pause.tar" --entrypoint '["/pause"]' 2>/dev/null

# Into the node's containerd store, unpacked (the node's containerd unpacks
# on first use), by a containerd of the same build run on the rootfs.
sock=$work/containerd.sock
cat >"$work/containerd.toml" <<EOF
version = 3
root = "$root/var/lib/containerd"
state = "$work/state"
imports = []
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$sock"
EOF
"$CONTAINERD_BIN/containerd" --config "$work/containerd.toml" >"$LOGDIR/kind-node-containerd.log" 2>&1 &
ctd_pid=$!
wait_for kind-node-containerd 30 "$CONTAINERD_BIN/ctr" --address "$sock" --timeout 5s version
for tar in "$imgs"/*.tar; do
  "$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io images import --no-unpack "$tar" >/dev/null 2>>"$LOGDIR/kind-node-containerd.log"
done
"$CONTAINERD_BIN/ctr" --address "$sock" -n k8s.io images ls -q 2>/dev/null | sed "s/^/  /" >&2
kill "$ctd_pid"; wait "$ctd_pid" 2>/dev/null || true; ctd_pid=
rm -rf "$imgs"

# ---------------------------------------------------------------- pack
log "packing $REF"
python3 "$MKIMAGE" "$root" "$REF" "$out" \
  --entrypoint '["/kind/bin/cgroup-v1-entrypoint", "/usr/local/bin/entrypoint", "/sbin/init"]' \
  --env container=docker --stop-signal 'SIGRTMIN+3'
# Tarballs of older recipes go: each is most of a GiB.
find "$CACHE/images" -maxdepth 1 -name "kind-node-*.tar" ! -name "$(basename "$out")" -delete
log "node image built in $(( $(date +%s) - started ))s"
echo "$out $REF"
