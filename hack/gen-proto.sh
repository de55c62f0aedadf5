#!/usr/bin/env bash
# Regenerate the committed Python stubs from protos/. The generated code pins
# minimum protobuf/grpcio runtimes (see the floors in pyproject.toml), so the
# grpcio-tools version used here is pinned too.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
GRPCIO_TOOLS_VERSION=1.85.1

if ! "$PYTHON" -c "import grpc_tools, importlib.metadata as m, sys; sys.exit(m.version('grpcio-tools') != '$GRPCIO_TOOLS_VERSION')" 2>/dev/null; then
  echo "gen-proto: needs grpcio-tools==$GRPCIO_TOOLS_VERSION in $PYTHON (pip install grpcio-tools==$GRPCIO_TOOLS_VERSION)" >&2
  exit 1
fi

# One line per proto: protos/<path> generates its stubs beside <path> in the
# repository. allocwatch/ ships in the wheel; e2e/ is test-side only (the DRA
# and plugin-registration APIs are spoken only by the e2e fake DRA plugin).
protos=(
  allocwatch/kubeletapi/podresources/v1/api.proto
  e2e/fakeplugin/deviceplugin/v1beta1/api.proto
  e2e/kubeletapi/dra/v1/api.proto
  e2e/kubeletapi/pluginregistration/v1/api.proto
)
for p in "${protos[@]}"; do
  d=$(dirname "$p")
  mkdir -p "$d"
  # Each directory on the import path is a package, so the stubs import by
  # their full dotted name and the api.proto files coexist.
  part=""
  for seg in ${d//\// }; do
    part=${part:+$part/}$seg
    [ -f "$part/__init__.py" ] || : > "$part/__init__.py"
  done
done
"$PYTHON" -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. "${protos[@]/#/protos/}"
# The fake device plugin also runs under another top-level name (`fakeplugin`
# in its image), so its grpc stubs import their own messages relatively;
# protoc has no option for it. The fake DRA plugin runs as e2e.fakedra and
# keeps protoc's absolute imports.
for p in "${protos[@]}"; do
  case $p in
    e2e/fakeplugin/*)
      package=$(dirname "$p" | tr / .)
      sed -i "s/^from ${package//./\\.} import /from . import /" "${p%.proto}_pb2_grpc.py"
      ;;
  esac
done
echo "gen-proto: regenerated ${#protos[@]} protos with grpcio-tools $GRPCIO_TOOLS_VERSION"
