// Package e2e runs the real `clawpen serve` binary against the fake Telegram
// Bot API and the fake model provider, with real sandboxes (bwrap, or Docker
// with CLAWPEN_E2E_SANDBOX=docker) running the real clawpen-agent. The host
// harness lives in test/harness.
package e2e

import (
	"os"
	"testing"

	"github.com/clawpen/clawpen/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m, nil)) }
