// Package load is the load and fault test: the real `clawpen serve` (through
// test/harness) with many registered groups, inbound messages at a steady
// rate plus bursts, sandboxes that fail, hang past the timeout or print
// garbage, a fake Telegram that answers some sends with 429 or 5xx and drops
// some connections, and the host SIGKILLed twice mid-run and restarted.
// Afterwards every triggered message must have been answered exactly once,
// nothing lost from the store, no sandbox orphaned, no goroutine or fd leak
// (goroutines counted through serve's CLAWPEN_DEBUG_ADDR endpoint), RSS back
// near its baseline. CLAWPEN_LOAD_PROFILE=dir saves a CPU profile and
// goroutine dumps taken mid-load; CLAWPEN_LOAD_HOSTLOG=dir keeps each serve
// process's log.
//
// `go test ./...` (and so `make test`) runs the CI size: 40 groups, 2,000
// messages, about a minute. CLAWPEN_LOAD_FULL=1 (`make load`) runs the full
// size: 200 groups, 20,000 messages.
package load

import (
	"os"
	"testing"

	"github.com/clawpen/clawpen/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, nil)) }
