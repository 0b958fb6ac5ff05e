package app

import (
	"context"
	"errors"
	"testing"

	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// A run waits for the sandbox check serve runs beside its start: one that
// failed refuses every run as no sandbox, and a run given up while it
// waits starts nothing.
func TestCheckedLaterRefusesUntilAndUnlessTheCheckPassed(t *testing.T) {
	failed := &checkedLater{done: make(chan struct{}), err: errors.New("no sandbox: bwrap: cannot create namespaces")}
	close(failed.done)
	if _, err := failed.Run(context.Background(), sandbox.Spec{}); !errors.Is(err, runner.ErrNoSandbox) {
		t.Fatalf("run after a failed check: %v, want ErrNoSandbox", err)
	}
	if failed.failed() == nil {
		t.Error("failed() is nil after a failed check")
	}

	pending := &checkedLater{done: make(chan struct{})}
	if pending.failed() != nil {
		t.Error("failed() is set while the check runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pending.Run(ctx, sandbox.Spec{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("run given up while the check runs: %v, want context.Canceled", err)
	}
}
