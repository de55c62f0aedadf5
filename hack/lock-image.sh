#!/usr/bin/env bash
# Regenerate image/requirements.txt: the watcher's runtime dependencies from
# pyproject.toml, resolved to exact versions with the sha256 of every file the
# index serves for them. The image installs from it with --require-hashes, so
# a rebuild gets the same packages, or fails, rather than whatever is newest.
# The build backend (setuptools) is locked too, and the image builds the
# package with it rather than with one pip would fetch unpinned.
# Resolved with this machine's interpreter: run it with the image's Python
# minor version (3.11), since markers and wheels are chosen per version.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
PIP_TOOLS_VERSION=7.7.0

"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || echo "lock-image: warning: $("$PYTHON" -V) is not the image's Python 3.11" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q "pip-tools==$PIP_TOOLS_VERSION"
CUSTOM_COMPILE_COMMAND="make image-lock" "$tmp/venv/bin/pip-compile" -q \
  --generate-hashes --strip-extras --no-emit-index-url --no-emit-find-links --upgrade \
  --all-build-deps --allow-unsafe \
  --output-file image/requirements.txt pyproject.toml
echo "lock-image: wrote image/requirements.txt with pip-tools $PIP_TOOLS_VERSION"
