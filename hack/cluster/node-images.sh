#!/usr/bin/env bash
# Build the node's own images with no Docker and no registry, and import them
# into containerd's k8s.io namespace (containerd must be running):
#   registry.k8s.io/pause:3.9       static pause (files/pause.c); the CRI sandbox image
#   localhost/busybox:<deb version> Debian's busybox-static, for the smoke test
# The tarballs are cached under $CACHE/images; importing is idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

IMG=$CACHE/images
mkdir -p "$IMG"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The tarball names hash their recipes (this script and mkimage.py) too, so
# changing how an image is made never reuses an old tarball.
recipe=$(cat "$CLUSTER_DIR/node-images.sh" "$CLUSTER_DIR/mkimage.py" | sha256sum | cut -c1-8)
PAUSE_REF=registry.k8s.io/pause:3.9
pause_tar=$IMG/pause-3.9-$(sha256sum "$CLUSTER_DIR/files/pause.c" | cut -c1-12)-$recipe.tar
if [ ! -f "$pause_tar" ]; then
  mkdir -p "$work/pause"
  gcc -Os -static -o "$work/pause/pause" "$CLUSTER_DIR/files/pause.c"
  strip "$work/pause/pause"
  python3 "$CLUSTER_DIR/mkimage.py" "$work/pause" "$PAUSE_REF" "$pause_tar" --entrypoint '["/pause"]'
fi

bb_version=$(dpkg-query -W -f '${Version}' busybox-static | sed 's/^[0-9]*://' | tr -c 'A-Za-z0-9_.\n-' '-')
BUSYBOX_REF=localhost/busybox:$bb_version
busybox_tar=$IMG/busybox-$bb_version-$recipe.tar
if [ ! -f "$busybox_tar" ]; then
  r=$work/busybox
  mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root"
  chmod 1777 "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for applet in $("$r/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$r/bin/$applet"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"
  echo 'root:x:0:' >"$r/etc/group"
  python3 "$CLUSTER_DIR/mkimage.py" "$r" "$BUSYBOX_REF" "$busybox_tar" --cmd '["sh"]'
fi

for tar in "$pause_tar" "$busybox_tar"; do
  ctr -n k8s.io images import "$tar" >/dev/null
done
set_image_env BUSYBOX_IMAGE "$BUSYBOX_REF"
log "node images imported: $PAUSE_REF $BUSYBOX_REF"
