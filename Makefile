# Federation Autoscaler — build, test, generate, bench, demo.
SHELL := /bin/bash
GO ?= go
BIN := bin/federation-autoscaler
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/federation-autoscaler/federation-autoscaler/cli.Version=$(VERSION)
# Tests: -race everywhere; the package timeout is generous because the
# real-apiserver suites build their control plane once into a cache.
TEST_FLAGS ?= -race -count=1 -timeout 45m
# golangci-lint (configuration: .golangci.yml), built from the module proxy
# by `go run` at this version and cached by the go command.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

# The browser tests' driver (.ci/setup installs it there).
export PLAYWRIGHT_DRIVER_PATH ?= /var/cache/federation-autoscaler/playwright-driver-1.52.0
# What .ci/setup could not install: one line per suite that will not run.
SETUP_MISSING := bin/setup-missing

.PHONY: all build setup test lint generate bench demo experiments fmt vet clean flake-hunt

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

# Installs what the suites need (idempotent; about a second once done).
setup:
	./.ci/setup $(SETUP_MISSING)

# Every suite, after the set-up; a suite that could not run is named in the
# final summary, after the test output, whatever the result. liqoctl is
# built in the background (.ci/setup): whether it was there is known only
# after the tests.
test: setup build lint
	$(GO) vet ./...
	@rc=0; $(GO) test $(TEST_FLAGS) ./... || rc=$$?; \
	bash deploy/liqotest/build-liqoctl.sh --check >>$(SETUP_MISSING); \
	if [ -s $(SETUP_MISSING) ]; then \
		echo; echo "=== NOT EVERY SUITE RAN: these skipped for lack of a tool (see .ci/setup) ==="; \
		sed 's/^/  NOT RUN  /' $(SETUP_MISSING); \
		echo "==="; \
	fi; \
	exit $$rc

# errcheck, staticcheck, unused, revive, the size and complexity limits and
# the rule that keeps mocks/ out of production packages (.golangci.yml).
# Parallel runners are allowed: two checkouts on one machine (a developer's
# and a fresh clone's `make test`) must not fail each other.
lint:
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

generate:
	# CRD types → deepcopy (agent/apis) and CRD manifests (deploy/crds).
	$(GO) tool controller-gen object paths=./agent/apis/... \
		crd:allowDangerousTypes=true output:crd:artifacts:config=deploy/crds
	# The manifests carry copies of the CRDs (deploy/deploytest TestManifestCopies).
	cp deploy/crds/autoscaling.federation-autoscaler.io_*.yaml deploy/manifests/crds/
	./adapter/externalgrpc/protos/generate.sh
	# templ components of the web UI (give templ the folder: it must not walk the tree).
	$(GO) tool templ generate -path web

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./...

# Runs the timing-heavy packages N times each under CPU load (not part of
# `make test`); N, LOAD, PKGS, RUN, TIMEOUT: see .ci/flake-hunt.
flake-hunt:
	./.ci/flake-hunt

# Flags for the demo: make demo DEMO_FLAGS="--providers 5 --workload".
DEMO_FLAGS ?=
demo: build
	./$(BIN) demo $(DEMO_FLAGS)

# The reference's headline table, ours (docs/experiments.md): the eco and
# latency suites at 3×7, 8×17, 15×35 and 30×70, one run at a time (each
# about 5 minutes on 2 cores), then the table of every suite's latest
# result in results/headline.md.
EXPERIMENTS ?= $(foreach s,3x7 8x17 15x35 30x70,experiments/eco-$(s).yaml experiments/latency-$(s).yaml)
experiments: build
	@set -e; for c in $(EXPERIMENTS); do echo "=== $$c"; nice -n 10 ./$(BIN) experiment --config $$c --log-level error; done
	./$(BIN) experiment table --results results --out results/headline.md

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_templ.go$$')

clean:
	rm -rf bin
