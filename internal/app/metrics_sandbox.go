package app

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/runner"
	"github.com/clawpen/clawpen/internal/sandbox"
)

// Sandbox wraps b so that every run is counted and timed; nil metrics
// return b itself.
func (m *hostMetrics) Sandbox(b runner.Sandbox) runner.Sandbox {
	if m == nil {
		return b
	}
	return measured{b, m}
}

type measured struct {
	runner.Sandbox
	m *hostMetrics
}

// Fingerprint is the wrapped backend's (runner.Fingerprinter), so that a
// rebuilt agent still makes warm sandboxes stale when metrics are on.
func (s measured) Fingerprint(ctx context.Context) (string, error) {
	if f, ok := s.Sandbox.(runner.Fingerprinter); ok {
		return f.Fingerprint(ctx)
	}
	return "", nil
}

func (s measured) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	name := s.Name()
	start := time.Now()
	// Observed at the ready line itself, not when the sandbox ends: a
	// scrape after the answer already counts the start.
	if spec.Stdout != nil {
		spec.Stdout = &firstWrite{w: spec.Stdout, first: func() {
			s.m.sandboxStart.WithLabelValues(name).Observe(time.Since(start).Seconds())
		}}
	}
	// A sandbox waits (warm) until its job is given, then runs.
	st := &runState{m: s.m}
	s.m.warm.Inc()
	if job := spec.Job; job != nil {
		spec.Job = func(ctx context.Context) ([]byte, error) {
			b, err := job(ctx)
			if err == nil {
				st.running()
			}
			return b, err
		}
	} else {
		st.running()
	}
	res, err := s.Sandbox.Run(ctx, spec)
	// The run is counted before the sandbox leaves its gauge: a scrape that
	// sees no sandbox running sees the run that ended. A warm sandbox dropped
	// unused is no run.
	st.end(func(jobAt time.Time) {
		outcome := "ok"
		switch {
		case res.Limit == sandbox.MemoryLimit:
			outcome = "oom"
		case res.Limit == sandbox.ProcessLimit:
			outcome = "pids_limit"
		case errors.Is(context.Cause(ctx), runner.ErrDiskQuota):
			// The host's watcher stopped the sandbox (its context's cause).
			outcome = "disk_limit"
		case err != nil:
			outcome = "error"
		case res.TimedOut:
			outcome = "timeout"
		case res.OutputTruncated:
			outcome = "output_limit"
		case res.ExitCode != 0:
			outcome = "failed"
		}
		s.m.runs.WithLabelValues(name, outcome).Inc()
		if err == nil {
			s.m.runDuration.WithLabelValues(name).Observe(time.Since(jobAt).Seconds())
		}
	})
	return res, err
}

// runState moves one sandbox from the warm gauge to the running one when
// its job is given.
type runState struct {
	m *hostMetrics

	mu    sync.Mutex
	ran   bool
	jobAt time.Time
}

func (r *runState) running() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ran {
		r.ran, r.jobAt = true, time.Now()
		r.m.warm.Dec()
		r.m.running.Inc()
	}
}

// end calls ran if the sandbox ran a job, then takes it off its gauge.
func (r *runState) end(ran func(jobAt time.Time)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ran {
		ran(r.jobAt)
		r.m.running.Dec()
	} else {
		r.m.warm.Dec()
	}
}

// firstWrite calls first once, when the agent first writes: its ready
// line, so the sandbox has started.
type firstWrite struct {
	w     io.Writer
	once  sync.Once
	first func()
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(f.first)
	}
	return f.w.Write(p)
}
