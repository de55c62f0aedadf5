#!/usr/bin/env bash
# Check, in one pass, what `make e2e` (the kind provider) needs before anything
# is built or installed: kind, kubectl, docker and a Docker daemon that
# answers. Every missing piece is named at once, so a user does not fix one
# only to meet the next, and the way without kind is named too.
#
# Usage: hack/e2e-preflight.sh
#   KIND, KUBECTL, DOCKER name the binaries (as the e2e suite reads them);
#   by default kind, kubectl and docker on PATH. helm is not checked here:
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

if [ ${#missing[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${missing[@]}")
  echo "make e2e (kind) is missing: ${list%, }." >&2
  echo "e2e: install them, or run the suite without kind or docker:" \
    "\`sudo make e2e-local\` (root, Debian 12: builds a single-node cluster on this machine, offline)." >&2
  exit 1
fi
