#!/usr/bin/env bash
# `make e2e` where Docker and kind are not there (root, Debian 12): kind on
# nerdctl from up.sh --runtime-only, then the e2e suite's kind provider with
# pytest-kind pointed at the built kind, kubectl and node image (pytest-kind
# creates and deletes the cluster), then down.sh, whatever the outcome.
#
# Usage: PYTHON=.venv/bin/python HELM=... hack/kind/e2e.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${PYTHON:?PYTHON must name the python of the project venv}"

rc=0
trap 'hack/kind/down.sh || { [ "$rc" -ne 0 ] || rc=1; }; exit "$rc"' EXIT
hack/kind/up.sh --runtime-only || { rc=$?; exit "$rc"; }
# shellcheck source=hack/kind/env.sh
. hack/kind/env.sh
"$PYTHON" -m pytest e2e --provider=kind --kind-bin="$KIND" --kind-kubectl-bin="$KUBECTL" \
  --kind-image="$KIND_NODE_IMAGE" "$@" || rc=$?
