# idemgate — the commands the README promises.
GO          ?= go
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: demo test lint bench e2e fuzz

## demo: run the main example on the embedded memory store under a push storm
demo:
	$(GO) run ./cmd/demo

## test: every test, race detector on, against real backends (see docs/testing.md)
test:
	$(GO) test -race -timeout 12m ./...

## lint: go vet and staticcheck
lint: $(STATICCHECK)
	$(GO) vet ./...
	$(STATICCHECK) ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

## e2e: only the end-to-end suite (real Pub/Sub emulator)
e2e:
	$(GO) test -race -timeout 10m -v ./e2e/...
