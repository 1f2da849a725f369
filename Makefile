# fleetdrill — build, test and benchmark targets. `make help` lists them.
# CI (.ci/run) runs `make lint`, `make tidy`, `make test` from a copy of the
# clone with nothing beside it, and `make test-shared` in place.

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

# The commit `fleetdrill version` prints when the toolchain stamps none (a
# git worktree, -buildvcs=false); where it stamps one, its own wins.
COMMIT   = $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED = $(shell git status --porcelain 2>/dev/null | grep -q . && echo true)
LDFLAGS_VCS = -X main.commit=$(COMMIT) -X main.modified=$(MODIFIED)

# go run, with the Makefile's CGO_CFLAGS (below): quiet on a cold build cache,
# where a plain go run prints go-nvml's deprecation warnings (README).
.PHONY: run
run: ## Run a scenario on the twin: ARGS are fleetdrill run's (ARGS='gameday-full --json gd.json'); none: the default scenario
	@$(GO) run ./cmd/fleetdrill run $(ARGS)

.PHONY: build
build: ## Build the fleetdrill binary into bin/
	$(GO) build -ldflags '$(LDFLAGS_VCS)' -o bin/fleetdrill ./cmd/fleetdrill

# Packages whose tests start containers: they run one package at a time, so
# two live fleets never share the two cores, beside the other packages'
# tests (a live test mostly waits on its containers and the wall clock).
LIVE_RE ?= /internal/livefleet$$|/internal/liverun$$|/features$$
# Live tests that run alone, after every other group (FLEETDRILL_LIVE_ALONE):
# what they compare depends on how fast the fleet serves.
ALONE_RE ?= TestLiveAutoscaleTimelineMatchesTwin|TestGameDayCountsBothDrivers|TestScriptsBothDrivers

# Packages of pure computation on the caller's goroutine — the simulation
# kernel, the twin, the scenario loader, the trace readers —
# run without the race detector: it finds nothing where nothing runs
# concurrently and makes them up to ten times slower (the twin: 9 s against
# 65 s). internal/layering_test.go checks that none of them starts a
# goroutine; the twin's concurrent use (the console's driver) is raced in
# internal/tui. Everything else runs with the detector.
PURE_PKGS := sim sim/stats twin twin/compile twin/dispatch twin/engine twin/fleet twin/latency twin/reqengine twin/sched scenarios internal/trace internal/openmetrics

# go-nvml's headers mark much of NVML deprecated: compiling go-nvml (once per
# build cache) prints 147 lines of warnings about code that is not ours. The
# compiler is told not to (the flags are otherwise Go's defaults). go.mod
# cannot say this for a plain go run or go install; the README says why.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

SHELL := /bin/bash

.PHONY: test
test: ## Run every test: each group runs whatever another's outcome, failures listed together at the end
	@set -o pipefail; dir=$$(mktemp -d); livepid=; \
	trap '[ -z "$$livepid" ] || { pkill -TERM -P $$livepid; kill $$livepid; } 2>/dev/null; rm -rf "$$dir"' EXIT; trap 'exit 130' INT TERM; \
	if docker info >/dev/null 2>&1; then \
		echo "make test: building the node image for the live tests"; \
		if out=$$($(MAKE) --no-print-directory image-node 2>&1); then export FLEETDRILL_NODE_IMAGE=fleetdrill-node:dev; \
		else echo "$$out"; echo "make test: the node image did not build: the live tests will skip"; fi; \
	else echo "make test: no Docker engine answers: the live tests will skip"; fi; \
	mod=$$($(GO) list -m) || exit 1; pkgs=$$($(GO) list $(PKGS)) || exit 1; \
	pure_re=$$(printf '%s$$|' $(addprefix $$mod/,$(PURE_PKGS))); pure_re="^($${pure_re%|})"; \
	live=$$(echo "$$pkgs" | grep -E '$(LIVE_RE)'); \
	pure=$$(echo "$$pkgs" | grep -v -E '$(LIVE_RE)' | grep -E "$$pure_re"); \
	race=$$(echo "$$pkgs" | grep -v -E '$(LIVE_RE)' | grep -v -E "$$pure_re"); \
	if [ -n "$$live" ]; then \
		echo "make test: live packages, one at a time, with the race detector (beside the others: they wait on containers more than they compute)"; \
		( $(GO) test -race -count=1 -p 1 $$live > "$$dir/live" 2>&1 || touch "$$dir/live.failed" ) & livepid=$$!; fi; \
	failed=""; \
	if [ -n "$$race" ]; then echo "make test: concurrent packages, with the race detector"; \
		$(GO) test -race -count=1 $$race 2>&1 | tee -a "$$dir/log" || failed="$$failed race"; fi; \
	if [ -n "$$pure" ]; then echo "make test: single-goroutine packages"; \
		$(GO) test -count=1 $$pure 2>&1 | tee -a "$$dir/log" || failed="$$failed pure"; fi; \
	if [ -n "$$live" ]; then echo "make test: waiting for the live packages"; wait $$livepid; livepid=; \
		cat "$$dir/live"; cat "$$dir/live" >> "$$dir/log"; [ ! -e "$$dir/live.failed" ] || failed="$$failed live"; \
		if echo "$$live" | grep -q '/internal/liverun$$'; then \
			echo "make test: the live comparisons that need the machine to themselves (their fleets' speed decides what they measure), alone"; \
			FLEETDRILL_LIVE_ALONE=1 $(GO) test -count=1 -run '$(ALONE_RE)' ./internal/liverun/ 2>&1 | tee -a "$$dir/log" || failed="$$failed alone"; fi; fi; \
	if [ -n "$$failed" ]; then \
		echo; echo "make test: FAILED in the groups:$$failed; every group ran. The failures:"; \
		grep -a -E '^(--- FAIL|FAIL|panic:)' "$$dir/log" | sort -u; exit 1; \
	fi; echo "make test: every group passed"

# The tests that read the team's shared data (../shared beside the checkout)
# or replay the library's traces, run from a copy of the work tree with
# nothing beside it, as a user's clone is: each must pass there, on the
# embedded traces (package traces) or a fixture under testdata/, or skip
# saying what is missing. make test runs them too, with ../shared where it
# is there. -skip leaves out the 20-seed sweep (make seeds), which reads
# what TestLibraryScenariosPass reads.
CLONE_PKGS ?= ./traces/ ./scenarios/ ./twin/ ./twin/latency/ ./internal/trace/ ./internal/calibrate/ ./internal/benchmark/ \
	./internal/openmetrics/ ./internal/gateway/ ./cmd/fleetdrill/ ./features/
CLONE_RUN  ?= Embedded|Library|Trace|Mooncake|Alibaba|README|Canary|Shadow|WriteParsesBack|Splitwise|BuiltinTable|Fidelity|SimToReal|Features
CLONE_SKIP ?= TestLibraryHoldsAcrossSeeds|TestLiveFeatures

.PHONY: copy
copy: ## Copy the work tree (tracked and unignored files) to DIR, e.g. make copy DIR=/tmp/x/fleetdrill: a clone with nothing beside it
	@test -n "$(DIR)" || { echo "make copy: set DIR, e.g. make copy DIR=$$(mktemp -d)/fleetdrill"; exit 2; }; \
	set -o pipefail; mkdir -p "$(DIR)" && git ls-files -z --cached --others --exclude-standard | \
		tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$(DIR)"

.PHONY: test-clone
test-clone: ## The tests that read ../shared or the library's traces, from a copy of the work tree with no ../shared beside it
	@set -o pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(MAKE) --no-print-directory copy DIR="$$tmp/clone" || exit 1; \
	echo "make test-clone: the shared-data and library-trace tests from $$tmp/clone, nothing beside it"; \
	cd "$$tmp/clone" && $(GO) test -count=1 -run '$(CLONE_RUN)' -skip '$(CLONE_SKIP)' $(CLONE_PKGS)

.PHONY: test-shared
test-shared: ## The same tests in place, on ../shared's full files where it is beside the clone (CI: after make test from a copy without it)
	@if [ ! -d ../shared ]; then echo "make test-shared: no ../shared beside this clone, nothing to add to make test"; exit 0; fi; \
	echo "make test-shared: the shared-data and library-trace tests, on ../shared"; \
	$(GO) test -count=1 -run '$(CLONE_RUN)' -skip '$(CLONE_SKIP)' $(CLONE_PKGS)

.PHONY: test-stress
test-stress: ## make test beside two busy loops: the suite on a loaded 2-core machine
	@pids=""; for i in 1 2; do (while :; do :; done) & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	echo "make test-stress: two busy loops running (pids$$pids)"; \
	$(MAKE) --no-print-directory test

.PHONY: bench
bench: ## Run the benchmarks but BenchmarkScale (make bench-scale) (BENCH_COUNT runs each; compare with benchstat)
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkScale$$' -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) $(BENCH_PKGS)

.PHONY: bench-scale
bench-scale: ## The twin's cost per request from 64 to 32,768 replicas (BenchmarkScale: req/cpu-s, cpu-ns/event, sys-B/replica; minutes)
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count $(or $(SCALE_COUNT),1) -timeout 60m ./twin/

.PHONY: seeds
seeds: ## Every library scenario's expectations at 20 consecutive seeds (make test runs it too)
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
check: lint tidy test test-clone test-shared ## Everything CI runs (CI runs make test from a copy: .ci/run)

.PHONY: image-node
image-node: ## Build the emulated node image fleetdrill-node:dev (FROM scratch, static binary)
	rm -rf bin/node-image && mkdir -p bin/node-image
	CGO_ENABLED=0 GOOS=linux $(GO) build -ldflags '$(LDFLAGS_VCS)' -o bin/node-image/fleetdrill ./cmd/fleetdrill
	cp internal/node/Dockerfile bin/node-image/Dockerfile
	docker build -q -t fleetdrill-node:dev bin/node-image

.PHONY: clean
clean: ## Remove build outputs
	rm -rf bin
