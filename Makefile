# cairn build and check targets. `make check` is what a change must pass before it lands.
STATICCHECK_VERSION := v0.8.2
GO ?= go
FUZZTIME ?= 30s
KEEP ?= 0
PKGS ?= ./...

.PHONY: all build test test-race check fmt vet staticcheck bench fuzz

all: build

build:
	$(GO) build ./...

test:
	$(GO) test ./...

test-race:
	$(GO) test -race ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

check: fmt vet staticcheck test-race

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

# Every fuzz target with -fuzz, FUZZTIME each (default 30s); failing inputs stay in
# testdata/fuzz as regression seeds; KEEP=N also keeps N new corpus entries per target.
fuzz:
	FUZZTIME=$(FUZZTIME) KEEP=$(KEEP) scripts/fuzz $(PKGS)
