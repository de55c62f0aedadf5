# allocwatch developer entry points. They run from a clean clone, except
# image-size (it inspects what `make image` built) and upstream, interop and
# bench-compare (they need the pinned upstream tarball in ../shared/upstream/,
# or GitHub to clone it from; see the README). `make venv`
# (implied by the Python targets) installs the project and its test extras
# into .venv.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
IMAGE_REPO ?= localhost/allocwatch
# the chart's appVersion, so `helm install` finds what `make image` built
IMAGE_TAG ?= $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE ?= $(IMAGE_REPO):$(IMAGE_TAG)
BASE_IMAGE ?=
DOCKER ?= docker
# pip inside the build reaches the package index only over the host network here
DOCKER_BUILD_FLAGS ?= --network host
# upstream's tools: built by `make upstream`, unless ALLOCWATCH_UPSTREAM_DIR has them
UPSTREAM_TOOLS := $(if $(ALLOCWATCH_UPSTREAM_DIR),,upstream)

.PHONY: venv test test-stress interop fuzz apiserver-test lint chart-docs proto bench bench-breakdown bench-shutdown bench-hostile bench-compare bench-kubeclients bench-podwatch image image-lock image-fakeplugin image-size upstream \
        cluster-up cluster-down cluster-images cluster-smoke e2e e2e-local

.PHONY: realstack-smoke containerd-smoke

.PHONY: help helm e2e-preflight demo demo-down

## help: list the targets and what each does
help:
	@awk '/^## [a-z0-9-]+: / {sub(/^## /, ""); t = $$0; sub(/:.*/, "", t); sub(/^[^:]*: /, ""); printf "  %-18s %s\n", t, $$0}' $(firstword $(MAKEFILE_LIST))

## venv: the project and its test extras in .venv
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,e2e]'
	touch $@

# The helm the chart tests and e2e run, linked as $(VENV)/bin/helm and passed
# on as HELM: the one HELM names (given to make or in the environment), else
# the pinned one, which hack/install-helm.sh installs into the cache on first
# use as `venv` installs the Python side. A PATH helm is not used: the tests
# are pinned to one helm. An install that cannot work fails here, in one line.
HELM_BIN := $(abspath $(VENV))/bin/helm

## helm: link the pinned helm (or HELM) as .venv/bin/helm, installing it if need be
helm: venv
	@h=$${HELM:-$$(PYTHON=$(PY) HELM_LINK= hack/install-helm.sh)} || exit 1; \
	p=$$(command -v "$$h") && [ -f "$$p" ] || { echo "make helm: HELM=$$h is not an executable file" >&2; exit 1; }; \
	ln -sfn "$$(realpath "$$p")" $(HELM_BIN)

## test: helm, lint, then every unit, integration and chart test, on every core
# (TEST_JOBS=0 runs them in this one process; test files stay whole on one worker)
TEST_JOBS ?= auto
test: helm lint
	HELM=$(HELM_BIN) $(PY) -m pytest tests --ignore=tests/interop --ignore=tests/apiserver \
	  -n $(TEST_JOBS) --dist loadfile

## apiserver-test: the pod watch against a real kube-apiserver and etcd (builds them: Go)
# The local cluster's binaries (hack/cluster/build.sh, cached under
# $ALLOCWATCH_CACHE), run as plain processes beside no kubelet; CI=1 makes a
# skip fail, as in make interop.
apiserver-test: helm
	hack/cluster/build.sh
	HELM=$(HELM_BIN) $(PY) -m pytest tests/apiserver

## interop: against upstream nvml-mock-ctl and its mock libnvidia-ml.so (needs `make upstream`)
# (ALLOCWATCH_UPSTREAM_DIR=<dir with ready-built tools> skips the build)
interop: venv $(UPSTREAM_TOOLS)
	$(PY) -m pytest tests/interop

## test-stress: the time/signal/process tests (interop too) STRESS_RUNS=20 times beside STRESS_CPU=<cores> busy workers
# (stress-ng, installed if missing; STRESS_CPU=0 for quiet runs); reports every
# failure with its load. Needs `make upstream` as interop does.
STRESS_RUNS ?= 20
STRESS_CPU ?= $(shell nproc)
test-stress: venv $(UPSTREAM_TOOLS)
	PYTHON=$(PY) STRESS_RUNS=$(STRESS_RUNS) STRESS_CPU=$(STRESS_CPU) hack/test-stress.sh

## fuzz: the property tests with many more examples and claim sets up to 10,000
fuzz: venv
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest tests/unit/test_properties.py

## lint: ruff over the whole tree
lint: venv
	$(VENV)/bin/ruff check .

## chart-docs: regenerate the chart README's values table from values.yaml (helm-docs)
chart-docs:
	hack/chart-docs.sh

## proto: regenerate the committed gRPC stubs
proto: venv
	$(PY) -m pip install -q -e '.[proto]'
	PYTHON=$(PY) hack/gen-proto.sh

## bench: watcher latency/CPU/RSS/writes against a fake kubelet
bench: venv
	$(PY) -m bench.watcher

## bench-breakdown: where a poll's CPU goes, step by step, in-process
bench-breakdown: venv
	$(PY) -m bench.breakdown

## bench-shutdown: how soon a watcher SIGTERMed in its first seconds exits
bench-shutdown: venv
	$(PY) -m bench.shutdown

## bench-hostile: what huge or hostile override files and profiles cost a watcher
bench-hostile: venv
	$(PY) -m bench.hostile

## bench-compare: ours against upstream nvml-mock-ctl watch-allocations
bench-compare: venv $(UPSTREAM_TOOLS)
	$(PY) -m bench.compare

## bench-kubeclients: import time and memory of lightkube, kr8s and kubernetes, each in a fresh venv (package index)
bench-kubeclients: venv
	$(PY) -m bench.kubeclients

## bench-podwatch: the declared-load pod watch's CPU and memory over 110 pods on a real kube-apiserver (Go)
bench-podwatch: venv
	hack/cluster/build.sh
	$(PY) -m bench.podwatch

## upstream: build nvml-mock-ctl and the mock libnvidia-ml.so at the pinned commit (Go, gcc, make)
upstream:
	hack/upstream/build.sh

## image: build the watcher image (BASE_IMAGE=... for a local base)
image:
	$(DOCKER) build $(DOCKER_BUILD_FLAGS) -f image/Dockerfile $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) --build-arg VERSION=$(IMAGE_TAG) --build-arg REVISION=$(shell git rev-parse HEAD 2>/dev/null) -t $(IMAGE) .

## image-lock: re-resolve image/requirements.txt, the image's pinned and hashed dependencies
image-lock:
	hack/lock-image.sh

## image-fakeplugin: the fake device plugin used by the e2e tests
image-fakeplugin:
	$(DOCKER) build $(DOCKER_BUILD_FLAGS) -f image/Dockerfile --target fakeplugin $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -t $(IMAGE_REPO)-fakeplugin:$(IMAGE_TAG) .

## image-size: the size of the image `make image` built
image-size:
	@set -o pipefail; $(DOCKER) image inspect -f '{{.Size}}' $(IMAGE) | awk '{printf "%s %.1f MiB\n", "$(IMAGE)", $$1/1048576}'

# The local single-node cluster (root; offline): hack/cluster/README.md
## cluster-up: start the local single-node cluster (root; builds it on first use)
cluster-up:
	hack/cluster/up.sh
## cluster-down: stop the local cluster and undo what it did to the machine
cluster-down:
	hack/cluster/down.sh
## cluster-images: build the project images and import them into the local cluster
cluster-images: cluster-up
	hack/cluster/images.sh
## cluster-smoke: pods, logs, exec and a device plugin on the local cluster
cluster-smoke: venv
	PYTHON=$(PY) hack/cluster/smoke.sh

# The real stack's pieces, checked outside the cluster (root; offline): hack/realstack/README.md
## realstack-smoke: nvml-mock's image, nvidia-smi, allocwatch --once and NVIDIA's device plugin together, no cluster
realstack-smoke: venv
	PYTHON=$(PY) hack/realstack/smoke.sh
## containerd-smoke: the containerd 2.x build injects nvml-mock's CDI device into a container, no cluster
containerd-smoke: venv
	PYTHON=$(PY) hack/realstack/containerd-smoke.sh

# Before anything is installed: how make e2e gets kind (Docker's, or as root
# on Debian 12 kind on nerdctl built by hack/kind), else every tool it lacks,
# named in one pass with the ways without them.
e2e-preflight:
	@DOCKER=$(DOCKER) hack/e2e-preflight.sh >/dev/null

## demo: NVIDIA's nvml-mock, device plugin and allocwatch on the local cluster, left running (root)
demo: helm cluster-up cluster-images
	HELM=$(HELM_BIN) PYTHONPATH=. $(PY) hack/demo.py up
## demo-down: remove what make demo deployed, nvml-mock's files included
demo-down: helm
	HELM=$(HELM_BIN) PYTHONPATH=. $(PY) hack/demo.py down

## e2e: end-to-end on kind: Docker's, or as root on Debian 12 kind on nerdctl built offline (hack/kind)
e2e: e2e-preflight helm
	@if [ "$$(DOCKER=$(DOCKER) hack/e2e-preflight.sh 2>/dev/null)" = nerdctl ]; then \
	  set -x; HELM=$(HELM_BIN) PYTHON=$(PY) hack/kind/e2e.sh; \
	else set -x; HELM=$(HELM_BIN) $(PY) -m pytest e2e --provider=kind; fi

## e2e-local: end-to-end on the offline single-node cluster, every stack (root, Debian 12; no kind)
# (E2E_LOCAL_STACKS="real real-dra" runs some of them, in that order)
E2E_LOCAL_STACKS ?= fake real real-dra
e2e-local: helm cluster-up cluster-images
	@for stack in $(E2E_LOCAL_STACKS); do \
	  set -x; HELM=$(HELM_BIN) $(PY) -m pytest e2e --provider=local --stack=$$stack || exit 1; { set +x; } 2>/dev/null; \
	done
