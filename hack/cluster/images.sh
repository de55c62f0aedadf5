#!/usr/bin/env bash
# Build the project's images offline and import them into the node's
# containerd (k8s.io namespace), where pods use them with
# imagePullPolicy IfNotPresent/Never:
#   1. base rootfs: debootstrap minbase + python3, python3-venv, python3-pip,
#      with this machine's CA certificates (pip inside docker build goes
#      through a TLS-intercepting proxy); cached as a tarball keyed by its inputs
#   2. dockerd (ours, own socket and data root) on the cluster's containerd;
#      `docker import` of the rootfs as localhost/bookworm-py:<key>
#   3. `docker build --network host --build-arg BASE_IMAGE=...` of every target
#      in TARGETS from image/Dockerfile, tagged with a hash of the build context
#   4. `docker save` | `ctr -n k8s.io images import`
#   5. the real stack's images and charts (hack/realstack): nvml-mock's,
#      NVIDIA's device plugin's and DRA driver's; built offline, cached, and
#      imported the same way
# The resulting references are written to $STATE/images.env.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Dockerfile target -> images.env variable and image repository.
TARGETS="allocwatch:ALLOCWATCH_IMAGE:localhost/allocwatch fakeplugin:FAKEPLUGIN_IMAGE:localhost/allocwatch-fakeplugin"
DOCKERFILE=image/Dockerfile
SUITE=bookworm
INCLUDE=python3,python3-venv,python3-pip

[ "$(id -u)" = 0 ] || die "run as root"
bin_dirs
pid_alive containerd || die "the cluster's containerd is not running: run make cluster-up first"
started=$(date +%s)
lock_state

missing=()
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------- 1. rootfs
mirror=$(apt_mirror "$SUITE")
mapfile -t cas < <(find /usr/local/share/ca-certificates -name '*.crt' -type f 2>/dev/null | sort)
ca_sums=$(for crt in "${cas[@]}"; do sha256sum "$crt"; done)
# This script is the recipe (debootstrap, CA setup, cleanup, the import's options).
recipe=$(sha256sum "$CLUSTER_DIR/images.sh" | cut -c1-12)
key=$(printf '%s\n%s\n%s\n' "$SUITE $INCLUDE" "$ca_sums" "$recipe" | sha256sum | cut -c1-12)
rootfs_tar=$CACHE/rootfs/$SUITE-py-$key.tar
if [ ! -f "$rootfs_tar" ]; then
  log "debootstrap $SUITE ($INCLUDE) from $mirror (about a minute)"
  mkdir -p "$CACHE/rootfs"
  rootfs=$(mktemp -d "$CACHE/rootfs/build.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" "$mirror" \
    >"$LOGDIR/debootstrap.log" 2>&1 || { show_log debootstrap; die "debootstrap failed"; }
  for crt in "${cas[@]}"; do cp "$crt" "$rootfs/usr/local/share/ca-certificates/"; done
  chroot "$rootfs" update-ca-certificates >/dev/null
  rm -f "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin
  rm -rf "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --numeric-owner -cf "$rootfs_tar.tmp" .
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$rootfs"; trap - EXIT
fi
BASE_IMAGE=localhost/bookworm-py:$key

# ---------------------------------------------------------------- 2. dockerd
# Our own dockerd: its own socket, data root and pid file, so it can coexist
# with any other Docker on the machine. No bridge and no iptables rules: builds
# use the host network. Started after containerd and told to use it, so
# nothing else spawns a containerd.
DOCKER_RUN=${ALLOCWATCH_DOCKER_RUN:-/run/allocwatch-cluster}
export DOCKER_HOST=unix://$DOCKER_RUN/docker.sock
docker_ok() { timeout 10 docker version; }
if ! pid_alive dockerd; then
  mkdir -p "$DOCKER_RUN"
  rm -f "$DOCKER_RUN/docker.pid" "$DOCKER_RUN/docker.sock"
  log "starting dockerd"
  start_daemon dockerd dockerd -H "$DOCKER_HOST" --containerd="$CONTAINERD_SOCK" \
    --data-root "$STATE/docker" --exec-root "$DOCKER_RUN/docker-exec" --pidfile "$DOCKER_RUN/docker.pid" \
    --bridge=none --iptables=false --ip-forward=false --ip-masq=false
fi
wait_for dockerd 30 docker_ok

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "docker import $BASE_IMAGE"
  docker import -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' "$rootfs_tar" "$BASE_IMAGE" >/dev/null
fi

# ---------------------------------------------------------------- 3. build
# The classic builder ignores image/Dockerfile.dockerignore, so the context is
# assembled here from its allow-list (the "!path" lines) as a deterministic
# tarball; its hash is the image tag, so an unchanged tree reuses the images.
cd "$REPO_ROOT"
mapfile -t paths < <(sed -n 's/^!//p' image/Dockerfile.dockerignore 2>/dev/null)
[ ${#paths[@]} -gt 0 ] || paths=(pyproject.toml README.md allocwatch e2e/fakeplugin e2e/__init__.py e2e/fakedra e2e/kubeletapi e2e/kubeletplugin)
existing=("$DOCKERFILE")
for p in "${paths[@]}"; do [ -e "$p" ] && existing+=("$p"); done
ctx=$(mktemp "$CACHE/images/context.XXXXXX.tar")
trap 'rm -f "$ctx"' EXIT
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  --exclude=__pycache__ --exclude='*.py[cod]' --exclude='*.egg-info' \
  -cf "$ctx" "${existing[@]}"
tag=local-$( { docker image inspect -f '{{.Id}}' "$BASE_IMAGE"; sha256sum <"$ctx"; } | sha256sum | cut -c1-12)

for spec in $TARGETS; do
  target=${spec%%:*}; rest=${spec#*:}; var=${rest%%:*}; repo=${rest#*:}
  ref=$repo:$tag
  if ctr -n k8s.io images ls -q "name==$ref" | grep -qx "$ref"; then
    log "$ref already in the node"
  else
    log "docker build --target $target -> $ref"
    docker build --network host --build-arg BASE_IMAGE="$BASE_IMAGE" --target "$target" \
      -f "$DOCKERFILE" -t "$ref" - <"$ctx" >"$LOGDIR/docker-build-$target.log" 2>&1 \
      || { show_log "docker-build-$target"; die "docker build of $target failed"; }
    # ---------------------------------------------------------- 4. import
    docker save "$ref" | ctr -n k8s.io images import - >/dev/null
  fi
  set_image_env "$var" "$ref"
  echo "$var=$ref"
done
# Older tags of our repositories (and their dangling layers) only fill our
# dockerd's data root; the node's containerd keeps its own copies.
keep=" $BASE_IMAGE "
for spec in $TARGETS; do rest=${spec#*:}; keep="$keep${rest#*:}:$tag "; done
for spec in $TARGETS "x:x:localhost/bookworm-py"; do
  rest=${spec#*:}; repo=${rest#*:}
  for old in $(docker images --format '{{.Repository}}:{{.Tag}}' "$repo"); do
    [[ $keep == *" $old "* ]] || docker rmi "$old" >/dev/null 2>&1 || true
  done
done
docker image prune -f >/dev/null 2>&1 || true
log "images ready in $(( $(date +%s) - started ))s; references in $STATE/images.env"

# ---------------------------------------------------------------- 5. real stack
# For `pytest e2e --stack=real|real-dra` and `make demo`: nvml-mock's image and
# chart, NVIDIA's device plugin image, NVIDIA's DRA driver image and chart
# (hack/realstack/README.md). hack/kind, which runs the fake stack only, turns
# this off.
[ "${ALLOCWATCH_REALSTACK_IMAGES:-1}" = 1 ] || exit 0
for script in nvml-mock-image.sh device-plugin.sh dra-driver.sh; do
  out=$("$REPO_ROOT/hack/realstack/$script" --import) || die "hack/realstack/$script failed"
  while IFS='=' read -r var ref; do
    case $var in
      NVML_MOCK_IMAGE|NVML_MOCK_CHART|DEVICE_PLUGIN_IMAGE|DRA_DRIVER_IMAGE|DRA_DRIVER_CHART) set_image_env "$var" "$ref"; echo "$var=$ref" ;;
    esac
  done <<<"$out"
done
log "real-stack images ready in $(( $(date +%s) - started ))s"
