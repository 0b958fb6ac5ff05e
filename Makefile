# clawpen — two commands: `make run` (the host) and `make test` (everything).
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Count-based: a duration races the fuzz coordinator's deadline in Go 1.26
# (go.dev/issue/75804) and fails spuriously on a busy machine.
FUZZTIME  ?= 5000x

.PHONY: all build run test vet fuzz bench load deps doctor image clean

all: build

# The dedicated, non-login user a root host runs sandboxes as
# (CLAWPEN_SANDBOX_USER): what agents write belongs to it, never to root
# or to a person's account.
SANDBOX_USER ?= $(or $(CLAWPEN_SANDBOX_USER),clawpen-sandbox)

# System packages the host needs: bubblewrap (sandbox), runsc (gVisor, the
# sandbox of profiles with "runtime": "gvisor"), gcc (cgo for SQLite),
# busybox-static and debootstrap (Docker test and agent images), Compose (the
# tests bring configs/compose.yaml up), espeak-ng and opus-tools (the tests'
# real voice notes), PostgreSQL (the tests start a server of their own from
# its binaries; pg_dump backs a PostgreSQL database up). Installed only when
# missing. As root, also the sandbox user when missing.
deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v runsc >/dev/null || missing="$$missing runsc"; \
	command -v gcc >/dev/null || missing="$$missing gcc libc6-dev"; \
	command -v ss >/dev/null || missing="$$missing iproute2"; \
	command -v systemd-analyze >/dev/null || missing="$$missing systemd"; \
	command -v espeak-ng >/dev/null || missing="$$missing espeak-ng"; \
	command -v opusenc >/dev/null || missing="$$missing opus-tools"; \
	test -x /bin/busybox || missing="$$missing busybox-static"; \
	{ ls /usr/lib/postgresql/*/bin/initdb || command -v initdb; } >/dev/null 2>&1 && command -v pg_dump >/dev/null || missing="$$missing postgresql"; \
	if command -v docker >/dev/null; then command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	  docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || missing="$$missing docker-compose"; fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "missing packages:$$missing — install them with: sudo apt-get install$$missing"; exit 1; fi; \
	fi
	@if [ "$$(id -u)" = 0 ] && ! id -u $(SANDBOX_USER) >/dev/null 2>&1; then \
	  echo "creating the sandbox user $(SANDBOX_USER)"; \
	  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(SANDBOX_USER); \
	fi

build: $(BIN)/clawpen $(BIN)/clawpen-agent

$(BIN)/clawpen: FORCE
	CGO_ENABLED=1 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $@ ./cmd/clawpen

# The benchmark: a program of its own, so that it and the fakes it starts
# never ship in clawpen (test/bench checks clawpen's symbol table).
$(BIN)/clawpen-bench: FORCE
	CGO_ENABLED=1 $(GO) build -o $@ ./cmd/clawpen-bench

# The agent runs inside sandboxes: static, no cgo.
$(BIN)/clawpen-agent: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/clawpen-agent

FORCE:

# The Docker agent image; the base is made locally with debootstrap when missing.
image: build
	./$(BIN)/clawpen image build

run: deps build
	@test -f .env || { echo "No .env: cp configs/.env.example .env and fill in TELEGRAM_BOT_TOKEN and ANTHROPIC_API_KEY"; exit 1; }
	./$(BIN)/clawpen serve

doctor: build
	./$(BIN)/clawpen doctor

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...
	GOFLAGS= $(GO) run $(STATICCHECK) ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt needed"; exit 1; }

# The bwrap pass (every package, one at a time), the gVisor, Docker and
# PostgreSQL passes run at once: each host makes cgroups of its own and the
# tests mostly wait for messages, not for the CPU. The bwrap pass prints as it
# goes; the others' output is printed whole when they have ended. The gVisor
# escape pass is the longest beside the bwrap pass: it starts first.
# GVISOR_E2E=sandbox limits gVisor's end-to-end pass to the tests that
# exercise the sandbox itself, should CI outgrow 35 minutes on 2 cores
# (docs/decisions.md, "gVisor in make test").
PASSLOG = /tmp/clawpen-test-pass
GVISOR_E2E ?= all
GVISOR_E2E_SANDBOX = ^Test(OwnerGetsAnswerFromSandbox|GroupTriggerContextAndEscaping|RestartMidRunLosesAndDuplicatesNothing|SandboxHoldsAgainstAgent|Run|RunAtItsLimitSaysWhich|ProcessLimitLeavesTheAgentItsProcesses|ProfileTimeoutEndsRun|FilesReachTheAgent|SendFileAsDocumentAndPhoto|SendFileRefusals|HostileFileNames|ExtraMountVisibleMaskedAndReadOnly|EgressThroughTheProxy|CredentialInjection|BridgeTools|Warm.*)$$
GVISOR_E2E_RUN = $(if $(filter sandbox,$(GVISOR_E2E)),$(GVISOR_E2E_SANDBOX),.)

test: deps build vet
	@rm -f $(PASSLOG).*; \
	if [ "$$(id -u)" != 0 ]; then echo "SKIP gVisor end-to-end and escape tests: runsc needs root"; \
	elif ! runsc --network=none do /bin/true >/dev/null 2>&1; then \
	  echo "SKIP gVisor end-to-end and escape tests: runsc cannot run a sandbox here (runsc --network=none do /bin/true failed)"; \
	else \
	  ( CLAWPEN_E2E_SANDBOX=gvisor $(GO) test -count=1 -timeout 40m ./test/escape/ >$(PASSLOG).gvisor-escape 2>&1; \
	    echo $$? >$(PASSLOG).gvisor-escape.rc ) & \
	  ( CLAWPEN_E2E_SANDBOX=gvisor $(GO) test -count=1 -timeout 30m -run '$(GVISOR_E2E_RUN)' ./test/e2e/ >$(PASSLOG).gvisor-e2e 2>&1; \
	    echo $$? >$(PASSLOG).gvisor-e2e.rc ) & \
	fi; \
	if docker info >/dev/null 2>&1; then \
	  for pkg in e2e escape; do \
	    ( CLAWPEN_E2E_SANDBOX=docker $(GO) test -count=1 -timeout 20m ./test/$$pkg/ >$(PASSLOG).docker-$$pkg 2>&1; \
	      echo $$? >$(PASSLOG).docker-$$pkg.rc ) & \
	  done; \
	else echo "SKIP Docker end-to-end tests: no Docker engine answers (docker info failed)"; fi; \
	( CLAWPEN_E2E_DATABASE=postgres $(GO) test -count=1 -timeout 20m \
	  -run 'TestOwnerGetsAnswerFromSandbox|TestGroupTriggerContextAndEscaping|TestStrangerIgnoredAndNotStored|TestRestartMidRunLosesAndDuplicatesNothing|TestAdminCommandsNotRunTwiceAfterCrash|TestBackupWhileServing|TestMetricsReadinessAndRedactedJSONLogs' \
	  ./test/e2e/ >$(PASSLOG).postgres 2>&1; echo $$? >$(PASSLOG).postgres.rc ) & \
	$(GO) test -p 1 -count=1 -timeout 20m ./...; rc=$$?; \
	wait; \
	for f in $(PASSLOG).*.rc; do \
	  pass=$${f%.rc}; pass=$${pass#$(PASSLOG).}; \
	  echo "== end-to-end tests again: $$pass (exit $$(cat $$f))"; cat $${f%.rc}; \
	  [ "$$(cat $$f)" = 0 ] || rc=1; \
	done; \
	exit $$rc
	$(MAKE) --no-print-directory fuzz

# Every fuzz target for a bounded time (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >/tmp/clawpen-fuzz.out 2>&1 || { cat /tmp/clawpen-fuzz.out; exit 1; }; \
	  done; done; echo "fuzz: all targets ran $(FUZZTIME) each"

# Sandbox start, host overhead, inbound throughput, footprint and scaling,
# measured on this machine (see `bin/clawpen-bench --help`; BENCHFLAGS passes
# flags, e.g. BENCHFLAGS=--quick).
bench: build $(BIN)/clawpen-bench
	./$(BIN)/clawpen-bench $(BENCHFLAGS)

# The load and fault test at full size (200 groups, 20,000 messages, two
# SIGKILLs); `make test` runs it at CI size (40 groups, 2,000 messages).
load: build
	CLAWPEN_LOAD_FULL=1 $(GO) test -count=1 -v -timeout 40m -run TestLoadAndFaults ./test/load/

clean:
	rm -rf $(BIN)
