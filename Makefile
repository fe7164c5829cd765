# errand — common tasks. `make help` lists them.
.DEFAULT_GOAL := help
GO ?= go

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: test
test: ## run every test with the race detector (what CI runs)
	$(GO) test -race ./...

.PHONY: test/short
test/short: ## run every test without the race detector
	$(GO) test ./...

.PHONY: lint
lint: ## go vet and gofmt
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: bench
bench: ## errand bench (20,000 no-op tasks on SQLite) and the Go benchmarks
	$(GO) run ./cmd/errand bench
	$(GO) test -run '^$$' -bench . -benchtime 20000x ./internal/engine/

.PHONY: fuzz
fuzz: ## run every fuzz target for a minute (FUZZTIME=10s for less)
	.ci/fuzz $(or $(FUZZTIME),60s)

.PHONY: soak/crashpoints
soak/crashpoints: ## build errand with -tags crashpoint and walk every crash point (inside a write's transaction, after its commit): nothing lost or paid twice
	$(GO) run ./soak -crashpoints $(if $(SEED),-seed $(SEED))
	@if [ -n "$$ERRAND_TEST_POSTGRES_URL" ]; then $(GO) run ./soak -crashpoints -store "$$ERRAND_TEST_POSTGRES_URL" $(if $(SEED),-seed $(SEED)); fi

.PHONY: soak
soak: ## kill -9 errand serve 200 times under 2,000 five-step tasks: nothing lost or paid twice (SEED=N replays; on PostgreSQL too, two daemons, when ERRAND_TEST_POSTGRES_URL is set)
	$(GO) run ./soak $(if $(SEED),-seed $(SEED))
	@if [ -n "$$ERRAND_TEST_POSTGRES_URL" ]; then $(GO) run ./soak -store "$$ERRAND_TEST_POSTGRES_URL" $(if $(SEED),-seed $(SEED)); fi

.PHONY: verify
verify: lint test ## everything CI checks

# VERSION is what `errand version` prints; BUILD_TIME when it was built.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
BUILD_TIME ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X github.com/errandhq/errand/internal/version.version=$(VERSION) -X github.com/errandhq/errand/internal/version.buildTime=$(BUILD_TIME)

.PHONY: build
build: ## build bin/errand, stamped with VERSION (default: git describe)
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/errand ./cmd/errand
