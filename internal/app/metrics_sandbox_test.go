package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

type printed struct{ id string }

func (printed) Name() string { return "printed" }
func (printed) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return sandbox.Result{}, nil
}
func (p printed) Fingerprint(context.Context) (string, error) { return p.id, nil }

// The wrapper keeps the backend's fingerprint: without it a rebuilt agent
// would not make warm sandboxes stale whenever metrics are on.
func TestSandboxKeepsFingerprint(t *testing.T) {
	wrapped := newHostMetrics(metricOptions{}).Sandbox(printed{id: "agent-v2"})
	f, ok := wrapped.(interface {
		Fingerprint(context.Context) (string, error)
	})
	require.True(t, ok)
	got, err := f.Fingerprint(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "agent-v2", got)
}

// readyThenWait writes its ready line, then runs until released.
type readyThenWait struct{ release chan struct{} }

func (readyThenWait) Name() string { return "bwrap" }
func (r readyThenWait) Run(_ context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	_, _ = spec.Stdout.Write([]byte(`{"type":"ready"}` + "\n"))
	<-r.release
	return sandbox.Result{}, nil
}

// The start is counted at the ready line: a scrape taken after the answer
// went out, while the sandbox still tears down, already holds it.
func TestSandboxStartCountedAtReadyLine(t *testing.T) {
	m := newHostMetrics(metricOptions{Backends: []string{"bwrap"}})
	r := readyThenWait{release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m.Sandbox(r).Run(context.Background(), sandbox.Spec{Stdout: io.Discard})
	}()
	assert.Eventually(t, func() bool {
		return testutil.CollectAndCount(m.sandboxStart) == 1 &&
			histogramCount(t, m, "clawpen_sandbox_start_seconds") == 1
	}, 5*time.Second, 5*time.Millisecond, "start not counted while the sandbox runs")
	close(r.release)
	<-done
	assert.Equal(t, uint64(1), histogramCount(t, m, "clawpen_sandbox_start_seconds"), "counted once")
}

func histogramCount(t *testing.T, m *hostMetrics, name string) uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// ended is a backend whose run ends as res and err say.
type ended struct {
	res sandbox.Result
	err error
}

func (ended) Name() string { return "bwrap" }
func (e ended) Run(context.Context, sandbox.Spec) (sandbox.Result, error) {
	return e.res, e.err
}

// A run is counted by how it ended, the limit it reached first: as the
// backend saw the kernel enforce it, or as the host's disk watcher stopped
// it (the cause of the run's context).
func TestRunOutcomes(t *testing.T) {
	quota := fmt.Errorf("%w: over the quota of 1 MB", runner.ErrDiskQuota)
	for _, tc := range []struct {
		name, want string
		res        sandbox.Result
		err, cause error
	}{
		{"ok", "ok", sandbox.Result{}, nil, nil},
		{"memory", "oom", sandbox.Result{ExitCode: 137, Limit: sandbox.MemoryLimit}, nil, nil},
		{"processes", "pids_limit", sandbox.Result{ExitCode: 2, TimedOut: true, Limit: sandbox.ProcessLimit}, nil, nil},
		{"disk", "disk_limit", sandbox.Result{TimedOut: true}, context.Canceled, quota},
		{"cancelled", "error", sandbox.Result{TimedOut: true}, context.Canceled, errors.New("shutting down")},
		{"timeout", "timeout", sandbox.Result{TimedOut: true}, nil, nil},
		{"exit", "failed", sandbox.Result{ExitCode: 1}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newHostMetrics(metricOptions{Backends: []string{"bwrap"}})
			ctx, cancel := context.WithCancelCause(context.Background())
			if tc.cause != nil {
				cancel(tc.cause)
			}
			defer cancel(nil)
			_, _ = m.Sandbox(ended{tc.res, tc.err}).Run(ctx, sandbox.Spec{})
			for _, o := range runOutcomes {
				want := 0.0
				if o == tc.want {
					want = 1
				}
				assert.Equal(t, want, testutil.ToFloat64(m.runs.WithLabelValues("bwrap", o)), o)
			}
		})
	}
}
