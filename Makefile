# idemgate — the commands the README promises.
GO          ?= go
# Tools are installed into bin/ (ignored), nothing outside the repository.
STATICCHECK ?= bin/staticcheck

.PHONY: demo test lint bench e2e sim mutate

## demo: example-run on the in-memory store under a local push storm with
## duplicates, concurrent copies, republishes and a supplier that fails once
# example-run logs to stdout; pushstorm -spawn passes its endpoint's stdout
# and stderr to its own stderr (its report is its stdout): hence 2>.
demo:
	@mkdir -p bin
	$(GO) build -o bin/ ./cmd/example-run ./cmd/pushstorm
	LOG_LEVEL=debug IDEMGATE_STORE=memory:// bin/pushstorm -spawn bin/example-run -path /orders \
		-supplier 127.0.0.1:0 -expect-once -n 500 -concurrency 32 \
		-dup 0.2 -concurrent 0.1 -republish 0.1 -supplier-fail-first 1 -backoff-min 20ms -backoff-max 500ms \
		2>bin/demo.log || { tail -n 40 bin/demo.log; exit 1; }
	@echo "bin/demo.log is the server's JSON log, every delivery's outcome (LOG_LEVEL=debug). Follow one order:"
	@echo "  grep '\"order_id:o-000015\"' bin/demo.log"
	@echo "its first try ends in \"handler failed\" (the planned refusal, logged as ERROR), its retry in"
	@echo "\"order sent to supplier\" then \"delivery processed\"; a copy in \"duplicate delivery acknowledged\""
	@echo "or, while the key is held, \"key held by another delivery\" (retried, not run twice)."

## test: every test, race detector on, against real backends (see docs/testing.md),
## then the proof that the simulator finds each planted bug
test:
	$(GO) test -race -count=1 -timeout 12m ./...
	scripts/sim-plants.sh

## lint: go vet, staticcheck, go.mod as go mod tidy would write it, and no
## tracked binary or file over 1 MB
lint: $(STATICCHECK)
	scripts/check-tracked.sh
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...
	scripts/bench-http.sh

## e2e: only the end-to-end suite (real Pub/Sub emulator)
e2e:
	$(GO) test -race -timeout 10m -v ./e2e/...

## sim: the simulator's long soak on memstore, then its pipeline family on the
## model outbox (see docs/testing.md); SEEDS=n, PIPE_SEEDS=n, FIRST=n
SEEDS ?= 20000
PIPE_SEEDS ?= 300
FIRST ?= 1
sim:
	$(GO) test -count=1 -timeout 60m ./internal/sim/ -run 'TestSim$$' -v -sim.seeds=$(SEEDS) -sim.first=$(FIRST)
	$(GO) test -count=1 -timeout 60m ./internal/sim/ -run 'TestSimPipeline$$' -v -sim.burst-refusals -sim.seeds=$(PIPE_SEEDS) -sim.first=$(FIRST)

## mutate: mutation testing of the packages whose tests need no server
## (scripts/mutate.sh; figures and survivors in docs/testing.md); PKGS=./gateway…
PKGS ?=
mutate:
	scripts/mutate.sh $(PKGS)
