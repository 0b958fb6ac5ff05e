package app

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
	"github.com/clawpen/clawpen/internal/sandbox/gvisor"
)

// TestGVisorProfileRefusedWhereItDoesNotWork: a run whose profile asks for
// gVisor never falls back to the host's backend; it is refused with the
// reason, as a profile that cannot be used.
func TestGVisorProfileRefusedWhereItDoesNotWork(t *testing.T) {
	// The host's backend here is the one that refuses every run: a run
	// that reached it would fail with ErrNoSandbox.
	host := unavailable{errors.New("host backend reached")}
	made := 0
	r := &routed{Sandbox: host, make: func(context.Context) (*gvisor.Backend, error) {
		made++
		return nil, errors.New("runsc not found")
	}}
	for range 2 {
		_, err := r.Run(context.Background(), sandbox.Spec{Runtime: domain.RuntimeGVisor})
		require.ErrorIs(t, err, runner.ErrProfile)
		require.NotErrorIs(t, err, runner.ErrNoSandbox, "nothing ran on the host's backend")
		assert.Contains(t, err.Error(), "runtime gvisor, which does not work on this host: runsc not found")
	}
	assert.Equal(t, 1, made, "the failure is kept, not retried at every run")

	_, err := r.Run(context.Background(), sandbox.Spec{})
	require.ErrorIs(t, err, runner.ErrNoSandbox, "a default runtime runs on the host's backend")
	assert.Equal(t, 1, made)
}
