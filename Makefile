# fleetdrill — build, test and benchmark targets. `make help` lists them.
# CI (.ci/run) runs `make lint`, `make tidy` and `make test` (together: `make check`).

GO      ?= go
PKGS    ?= ./...
# Benchmarks: one package pattern, repeat count and time per benchmark.
BENCH_PKGS  ?= ./...
BENCH_COUNT ?= 6
BENCH_TIME  ?= 1s

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the fleetdrill binary into bin/
	$(GO) build -o bin/fleetdrill ./cmd/fleetdrill

# Packages whose tests start containers: they run one package at a time,
# after the others, so two live fleets never share the two cores.
LIVE_RE ?= /internal/livefleet$$|/internal/liverun$$|/features$$

.PHONY: test
test: ## Run every test with the race detector (live tests: the node image is built once, when Docker answers)
	@if docker info >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory image-node >/dev/null && export FLEETDRILL_NODE_IMAGE=fleetdrill-node:dev; \
	else echo "make test: no Docker engine answers: the live tests will skip"; fi; \
	pkgs=$$($(GO) list $(PKGS)) || exit 1; \
	rest=$$(echo "$$pkgs" | grep -v -E '$(LIVE_RE)'); live=$$(echo "$$pkgs" | grep -E '$(LIVE_RE)'); \
	if [ -n "$$rest" ]; then $(GO) test -race -count=1 $$rest || exit 1; fi; \
	if [ -n "$$live" ]; then $(GO) test -race -count=1 -p 1 $$live || exit 1; fi

.PHONY: bench
bench: ## Run the benchmarks (BENCH_COUNT runs each; compare runs with benchstat)
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) $(BENCH_PKGS)

.PHONY: seeds
seeds: ## Every library scenario's expectations at 20 consecutive seeds (skipped by make test's race detector)
	$(GO) test -count=1 -run '^TestLibraryHoldsAcrossSeeds$$' ./scenarios/

.PHONY: lint
lint: ## go vet, gofmt and staticcheck (pinned as a go.mod tool)
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) tool staticcheck $(PKGS)

.PHONY: tidy
tidy: ## Check that go.mod and go.sum are tidy
	$(GO) mod tidy -diff

.PHONY: check
check: lint tidy test ## Everything CI runs

.PHONY: image-node
image-node: ## Build the emulated node image fleetdrill-node:dev (FROM scratch, static binary)
	rm -rf bin/node-image && mkdir -p bin/node-image
	CGO_ENABLED=0 GOOS=linux $(GO) build -o bin/node-image/fleetdrill ./cmd/fleetdrill
	cp internal/node/Dockerfile bin/node-image/Dockerfile
	docker build -t fleetdrill-node:dev bin/node-image

.PHONY: clean
clean: ## Remove build outputs
	rm -rf bin
