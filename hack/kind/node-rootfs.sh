#!/usr/bin/env bash
# The Debian part of the kind node image, as a cached rootfs tarball; prints
# its path. It follows kind's images/base/Dockerfile (read from the kind module
# in the Go module cache), with Debian 12 where kind uses Debian 13: bookworm's
# systemd 252 still boots on a cgroup v1 host, trixie's does not.
#   - the packages the Dockerfile installs that a node here uses: systemd,
#     the networking and mount tools, libseccomp2 for runc, and Debian's CNI
#     plugins for the pod network (kind builds its own);
#   - kind's files (images/base/files: the entrypoint, the systemd units,
#     containerd's config, kind/bin), with the Dockerfile's modes;
#   - the Dockerfile's systemd set-up: only kubelet, containerd and
#     undo-mount-hacks enabled, binfmt masked, no kmsg in journald.
# Left out: NFS and iSCSI tools and fuse-overlayfs (rootless nodes only).
# node-image.sh adds the binaries and images on top.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

INCLUDE=systemd,systemd-sysv,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,curl,jq,procps,containernetworking-plugins

[ "$(id -u)" = 0 ] || die "run as root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing (apt-get install debootstrap)"
KIND_SRC=$CACHE/gomod/sigs.k8s.io/kind@$KIND_VERSION
[ -d "$KIND_SRC/images/base/files" ] || die "$KIND_SRC is missing: run hack/kind/build.sh first"
key=$(printf '%s\n' "$SUITE $INCLUDE" "$(recipe_key "$0")" \
  "$(cd "$KIND_SRC/images/base" && find files -type f | sort | xargs sha256sum)" | sha256sum | cut -c1-12)
out=$CACHE/rootfs/$SUITE-kind-node-$KIND_VERSION-$key.tar
if [ -f "$out" ]; then echo "$out"; exit 0; fi

mirror=$(apt_mirror "$SUITE")
mkdir -p "$CACHE/rootfs" "$LOGDIR"
rootfs=$(mktemp -d "$CACHE/rootfs/build.XXXXXX")
trap 'rm -rf "$rootfs"' EXIT
log "debootstrap $SUITE for the kind node from $mirror (cold: about 3 minutes)"
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" "$mirror" \
  >"$LOGDIR/debootstrap-kind-node.log" 2>&1 || { show_log debootstrap-kind-node; die "debootstrap failed"; }

# The Dockerfile's COPY lines: scripts and directories 0755, the rest 0644.
files=$KIND_SRC/images/base/files
(cd "$files" && find . -type f) | while read -r f; do
  mode=0644
  case $f in ./usr/local/bin/*|./kind/bin/*) mode=0755 ;; esac
  install -D -m "$mode" "$files/$f" "$rootfs/$f"
done
chmod 0755 "$rootfs/kind" "$rootfs/kind/bin"

# The Dockerfile's clean-up and service set-up.
rm -f "$rootfs"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service
rm -f "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/*
rm -f "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/basic.target.wants/*
rm -f "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl*
echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
systemctl --root="$rootfs" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
systemctl --root="$rootfs" mask systemd-binfmt.service >/dev/null 2>&1
mkdir -p "$rootfs/etc/kubernetes/manifests"

rm -f "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin
rm -rf "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" --numeric-owner -cf "$out.tmp" .
mv "$out.tmp" "$out"
log "node rootfs $out"
echo "$out"
