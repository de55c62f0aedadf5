#!/usr/bin/env bash
# Decide, before anything is built or installed, how `make e2e` gets its kind
# cluster, and print the way on stdout:
#   docker   kind, kubectl, docker and a Docker daemon that answers are there:
#            kind runs its nodes on Docker, as its users run it;
#   nerdctl  some are missing, and this is Debian 12 as root: hack/kind builds
#            kind, nerdctl and a node image offline and runs kind on nerdctl
#            (the note on stderr says so, with the first run's cost).
# Otherwise every missing piece is named at once, so a user does not fix one
# only to meet the next, with the ways without them, and it exits 1.
#
# Usage: hack/e2e-preflight.sh
#   KIND, KUBECTL, DOCKER name the binaries (as the e2e suite reads them);
#   by default kind, kubectl and docker on PATH. OS_RELEASE names the
#   os-release file (default /etc/os-release). helm is not checked here:
#   `make helm` installs the pinned one.
set -euo pipefail

missing=()

# found NAME VAR: true when $VAR (default NAME) is an executable path or a
# command on PATH; otherwise NAME is recorded as missing.
found() {
  local name=$1 var=$2 bin=${!2:-$1}
  command -v "$bin" >/dev/null 2>&1 && return 0
  if [ -n "${!var:-}" ]; then missing+=("$name ($var=$bin not found)")
  else missing+=("$name (not on PATH)")
  fi
  return 1
}

found kind KIND || true
found kubectl KUBECTL || true
if found docker DOCKER; then
  # A bounded probe: a docker CLI pointed at a wedged daemon would wait.
  if ! timeout 20 "${DOCKER:-docker}" info >/dev/null 2>&1; then
    missing+=("a Docker daemon (\`${DOCKER:-docker} info\` fails)")
  fi
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo docker
  exit 0
fi
list=$(printf '%s, ' "${missing[@]}")
# shellcheck disable=SC1090
debian12=$( . "${OS_RELEASE:-/etc/os-release}" 2>/dev/null && [ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ] && echo yes || true)
if [ "$debian12" = yes ] && [ "$(id -u)" = 0 ]; then
  echo "make e2e: no Docker kind here (${list%, }): running kind on nerdctl, built offline" \
    "by hack/kind (the first run builds it: about 20 minutes; later runs about 5)." >&2
  echo nerdctl
  exit 0
fi
echo "make e2e (kind) is missing: ${list%, }." >&2
echo "e2e: install them, or as root on Debian 12 \`sudo make e2e\` runs kind on nerdctl built offline" \
  "(hack/kind), or \`sudo make e2e-local\` runs the suite on a single-node cluster built on this machine." >&2
exit 1
