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

bench:
	go test -run '^$$' -bench . -benchmem ./...
