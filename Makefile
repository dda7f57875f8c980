# The test command: installs what the tests need into .cache, then runs every test with
# the race detector. .ci/run runs exactly `make test`.
SHELL := /bin/bash
CACHE := $(CURDIR)/.cache
# The npm peers' folder: $TOOLGATE_NPM_DIR when set (scripts/deps.sh installs there too).
NPM_DIR := $(or $(TOOLGATE_NPM_DIR),$(CACHE)/npm)
PEER_PATH := $(CACHE)/node22/node_modules/.bin:$(NPM_DIR)/node_modules/.bin

.PHONY: test deps vet build fuzz bench

test: deps vet
	PATH="$(PEER_PATH):$$PATH" TOOLGATE_NPM_DIR="$(NPM_DIR)" TOOLGATE_REQUIRE_PEERS=1 \
		go test -race -count=1 -timeout 25m ./...
	FUZZTIME=2s bash scripts/fuzz.sh

# A long fuzz round: every target for FUZZTIME (docs/reliability.md).
fuzz:
	FUZZTIME=$(or $(FUZZTIME),150s) bash scripts/fuzz.sh

deps:
	TOOLGATE_NPM_DIR="$(NPM_DIR)" bash scripts/deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...

build:
	CGO_ENABLED=0 go build -o toolgate ./cmd/toolgate

# The hot path's go test benchmarks (docs/performance.md), as benchstat reads them:
# `make bench > old.txt`, change, `make bench > new.txt`, `benchstat old.txt new.txt`.
# BENCH selects benchmarks, BENCH_PKGS packages, COUNT and BENCHTIME the runs.
# The default set: the passthrough call in process, the audit append per durability
# level, the kernel's decision, tools/list of 512 tools, the HTTP and stdio MCP layers,
# the strict decoder and the upstream stdio connection (no PostgreSQL benchmarks).
BENCH ?= ^Benchmark(PassthroughCall|PassthroughCallParallel|AppendAudit|AppendAuditParallel|AppCallAuthorized|CallAuthorized|ListTools512|OpenTurn512|HTTPToolsCall|StdioToolsCall|DecodeToolsCall|StdioCall|UpstreamCall)$$
BENCH_PKGS ?= ./internal/app/daemon/ ./internal/app/ ./internal/store/ ./internal/kernel/ ./internal/mcpserver/ ./internal/rpcwire/ ./internal/upstream/ ./internal/upstreamtools/
COUNT ?= 6
BENCHTIME ?= 1s
bench:
	go test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -benchtime $(BENCHTIME) $(BENCH_PKGS)
