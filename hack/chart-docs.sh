#!/usr/bin/env bash
# The chart README's values table, generated from values.yaml by helm-docs.
#
# Each chart value is documented once, in its `# --` comment in values.yaml;
# charts/allocwatch/README.md.gotmpl holds the prose around the table.
# helm-docs is built from the Go module proxy on first use and cached by
# version under $ALLOCWATCH_CACHE.
#
# Usage: hack/chart-docs.sh           rewrite charts/allocwatch/README.md
#        hack/chart-docs.sh --check   exit 1, with a diff, when it is stale
set -euo pipefail

HELM_DOCS_VERSION=v1.14.2

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=hack/common.sh
. "$here/common.sh"
LOG_NAME=chart-docs
cache=$(allocwatch_cache_dir)
bin=$cache/bin/helm-docs-$HELM_DOCS_VERSION/helm-docs

if [ ! -x "$bin" ]; then
  go=$(find_go) || die "no Go toolchain found (need go on PATH or in /usr/local/go)"
  log "building helm-docs $HELM_DOCS_VERSION from the Go module proxy"
  mkdir -p "$(dirname "$bin")"
  GOBIN=$(dirname "$bin") GOMODCACHE=$cache/gomod GOCACHE=$cache/gocache \
    GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0 \
    "$go" install "github.com/norwoodj/helm-docs/cmd/helm-docs@$HELM_DOCS_VERSION" >&2 ||
    die "go install helm-docs $HELM_DOCS_VERSION failed"
fi

chart=$repo/charts/allocwatch
generate() {
  "$bin" --chart-search-root "$chart" --template-files README.md.gotmpl --log-level warning "$@"
}
if [ "${1:-}" = --check ]; then
  if ! diff -u "$chart/README.md" <(generate --dry-run); then
    die "charts/allocwatch/README.md is stale: run make chart-docs"
  fi
else
  generate
fi
