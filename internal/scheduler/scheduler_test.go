package scheduler

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/store"
)

// guard bounds how long a test waits on a channel before it fails instead
// of hanging; it is a deadlock guard, not a timing assertion.
const guard = 10 * time.Second

type pause struct {
	wait  time.Duration
	timed bool
}

// harness runs a Scheduler over a real store in a temp dir. dispatched
// receives every dispatched task; sleeps receives, in order, every wait the
// loop is about to sleep, which tells a test that a step is complete (a
// step dispatches before it sleeps, on the same goroutine).
type harness struct {
	st         *store.Store
	s          *Scheduler
	dispatched chan domain.Task
	changed    chan struct{} // tasks changed
	sleeps     chan pause
	cancel     context.CancelFunc
	done       chan error
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "clawpen.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newHarness(t *testing.T, st *store.Store, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{
		st:         st,
		changed:    make(chan struct{}, 1),
		dispatched: make(chan domain.Task, 64),
		sleeps:     make(chan pause, 64),
		done:       make(chan error, 1),
	}
	cfg := Config{
		Store:       st,
		Loc:         time.UTC,
		MinInterval: time.Minute,
		Dispatch:    func(_ context.Context, t domain.Task) { h.dispatched <- t },
		Changed:     h.changed,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h.s = New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	h.cancel = cancel
	h.s.sleeping = func(wait time.Duration, timed bool) {
		select {
		case h.sleeps <- pause{wait, timed}:
		case <-ctx.Done():
		}
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			assert.NoError(t, err)
		case <-time.After(guard):
			t.Error("Run did not return after cancel")
		}
	})
	go func() { h.done <- h.s.Run(ctx) }()
	return h
}

func (h *harness) nextDispatch(t *testing.T) domain.Task {
	t.Helper()
	select {
	case task := <-h.dispatched:
		return task
	case <-time.After(guard):
		t.Fatal("no task dispatched")
		return domain.Task{}
	}
}

func (h *harness) nextSleep(t *testing.T) pause {
	t.Helper()
	select {
	case p := <-h.sleeps:
		return p
	case <-time.After(guard):
		t.Fatal("loop never went to sleep")
		return pause{}
	}
}

// noMoreDispatches asserts that nothing was dispatched beyond what the
// test already received; call it right after nextSleep, when the step that
// dispatched has finished.
func (h *harness) noMoreDispatches(t *testing.T) {
	t.Helper()
	select {
	case task := <-h.dispatched:
		t.Fatalf("unexpected dispatch of task %d", task.ID)
	default:
	}
}

func createTask(t *testing.T, st *store.Store, typ, value string, next time.Time) domain.Task {
	t.Helper()
	task, err := st.CreateTask(t.Context(), domain.Task{
		Group: "family", ChatID: -100, Prompt: "water the plants",
		ScheduleType: typ, ScheduleValue: value, NextRun: next,
	})
	require.NoError(t, err)
	return task
}

func ms(t time.Time) time.Time { return t.Truncate(time.Millisecond) }

func TestOnceDispatchedExactlyOnce(t *testing.T) {
	st := newStore(t)
	due := ms(time.Now().Add(200 * time.Millisecond))
	task := createTask(t, st, domain.ScheduleOnce, due.UTC().Format(time.RFC3339Nano), due)
	h := newHarness(t, st, nil)

	got := h.nextDispatch(t)
	assert.Equal(t, task.ID, got.ID)
	assert.True(t, got.NextRun.IsZero(), "a dispatched once task is unscheduled")
	assert.False(t, got.LastRun.Before(due), "last run %s before due %s", got.LastRun, due)

	// The loop then has nothing scheduled and sleeps without a timer.
	for p := h.nextSleep(t); p.timed; p = h.nextSleep(t) {
	}
	h.noMoreDispatches(t)
	stored, ok, err := st.Task(t.Context(), task.ID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, stored.NextRun.IsZero())
	assert.Equal(t, domain.TaskActive, stored.Status, "completing it is the runner's job")
}

func TestNextRunPersistedBeforeDispatch(t *testing.T) {
	st := newStore(t)
	due := ms(time.Now().Add(-time.Minute))
	task := createTask(t, st, domain.ScheduleInterval, "1h", due)
	seen := make(chan domain.Task, 1)
	h := newHarness(t, st, func(c *Config) {
		c.Dispatch = func(ctx context.Context, dt domain.Task) {
			stored, _, err := st.Task(ctx, dt.ID)
			assert.NoError(t, err)
			seen <- stored
		}
	})
	h.nextSleep(t)
	stored := <-seen
	assert.Equal(t, task.ID, stored.ID)
	assert.True(t, stored.NextRun.Equal(due.Add(time.Hour)), "next run %s not persisted before dispatch", stored.NextRun)
	assert.False(t, stored.LastRun.IsZero())
}

func TestIntervalTasksInDueOrder(t *testing.T) {
	st := newStore(t)
	now := ms(time.Now())
	later := createTask(t, st, domain.ScheduleInterval, "1h", now.Add(300*time.Millisecond))
	sooner := createTask(t, st, domain.ScheduleInterval, "1h", now.Add(150*time.Millisecond))
	h := newHarness(t, st, nil)

	assert.Equal(t, sooner.ID, h.nextDispatch(t).ID)
	assert.Equal(t, later.ID, h.nextDispatch(t).ID)
}

func TestOverdueTasksInDueOrder(t *testing.T) {
	st := newStore(t)
	now := ms(time.Now())
	b := createTask(t, st, domain.ScheduleInterval, "1h", now.Add(-time.Minute))
	a := createTask(t, st, domain.ScheduleInterval, "1h", now.Add(-2*time.Minute))
	h := newHarness(t, st, nil)

	assert.Equal(t, a.ID, h.nextDispatch(t).ID)
	assert.Equal(t, b.ID, h.nextDispatch(t).ID)
	p := h.nextSleep(t)
	assert.True(t, p.timed)
	assert.Positive(t, p.wait)
	h.noMoreDispatches(t)
}

func TestWakePicksUpSoonerTask(t *testing.T) {
	st := newStore(t)
	far := createTask(t, st, domain.ScheduleInterval, "2h", ms(time.Now().Add(time.Hour)))
	h := newHarness(t, st, nil)

	p := h.nextSleep(t)
	require.True(t, p.timed)
	require.Equal(t, maxSleep, p.wait, "the loop waits for the hour-away task, capped")

	soon := createTask(t, st, domain.ScheduleOnce, "2026-01-01T00:00:00Z", ms(time.Now().Add(50*time.Millisecond)))
	h.changed <- struct{}{}
	p = h.nextSleep(t)
	require.True(t, p.timed)
	assert.Less(t, p.wait, maxSleep, "after Wake the timer follows the sooner task")
	got := h.nextDispatch(t)
	assert.Equal(t, soon.ID, got.ID)
	assert.NotEqual(t, far.ID, got.ID)
}

func TestMissedIntervalRunsOnceKeepingPhase(t *testing.T) {
	st := newStore(t)
	now := ms(time.Now())
	due := now.Add(-(3*time.Hour + 7*time.Minute)) // the host was down
	task := createTask(t, st, domain.ScheduleInterval, "30m", due)
	h := newHarness(t, st, nil)

	got := h.nextDispatch(t)
	assert.Equal(t, task.ID, got.ID)
	p := h.nextSleep(t)
	require.True(t, p.timed)
	assert.Positive(t, p.wait)
	h.noMoreDispatches(t)

	stored, ok, err := st.Task(t.Context(), task.ID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, stored.NextRun.After(now), "next run %s not after now %s", stored.NextRun, now)
	assert.LessOrEqual(t, stored.NextRun.Sub(now), 30*time.Minute)
	assert.Zero(t, stored.NextRun.Sub(due)%(30*time.Minute), "phase lost")
}

func TestMissedCronRunsOnce(t *testing.T) {
	st := newStore(t)
	now := ms(time.Now())
	task := createTask(t, st, domain.ScheduleCron, "0 9 * * *", now.Add(-72*time.Hour))
	h := newHarness(t, st, nil)

	assert.Equal(t, task.ID, h.nextDispatch(t).ID)
	h.nextSleep(t)
	h.noMoreDispatches(t)
	stored, _, err := st.Task(t.Context(), task.ID)
	require.NoError(t, err)
	assert.True(t, stored.NextRun.After(now))
	assert.LessOrEqual(t, stored.NextRun.Sub(now), 24*time.Hour)
	assert.Equal(t, 9, stored.NextRun.Hour())
}

func TestBadScheduleGetsPaused(t *testing.T) {
	tests := []struct{ name, typ, value string }{
		{"malformed cron", domain.ScheduleCron, "every morning"},
		{"interval below minimum", domain.ScheduleInterval, "10s"},
		{"once not RFC 3339", domain.ScheduleOnce, "tomorrow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			now := ms(time.Now())
			bad := createTask(t, st, tt.typ, tt.value, now.Add(-time.Second))
			good := createTask(t, st, domain.ScheduleInterval, "1h", now.Add(-time.Second))
			h := newHarness(t, st, nil)

			assert.Equal(t, good.ID, h.nextDispatch(t).ID)
			h.nextSleep(t)
			h.noMoreDispatches(t)
			stored, _, err := st.Task(t.Context(), bad.ID)
			require.NoError(t, err)
			assert.Equal(t, domain.TaskPaused, stored.Status)
		})
	}
}

func TestEarlyWakeDoesNotSpin(t *testing.T) {
	st := newStore(t)
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	createTask(t, st, domain.ScheduleInterval, "1h", t0.Add(time.Second))
	// The first clock read (DueTasks) is before the due time, the second
	// (the wait) after it: the store says "due" yet nothing is due.
	var calls atomic.Int64
	h := newHarness(t, st, func(c *Config) {
		c.Now = func() time.Time {
			if calls.Add(1)%2 == 1 {
				return t0
			}
			return t0.Add(2 * time.Second)
		}
	})
	p := h.nextSleep(t)
	assert.Equal(t, pause{earlyWait, true}, p)
	h.noMoreDispatches(t)
}

func TestStoreErrorBacksOff(t *testing.T) {
	st := newStore(t)
	require.NoError(t, st.Close())
	h := newHarness(t, st, nil)
	assert.Equal(t, pause{retryMin, true}, h.nextSleep(t))
	h.changed <- struct{}{}
	assert.Equal(t, pause{2 * retryMin, true}, h.nextSleep(t))
}

func TestRunRequiresStoreAndDispatch(t *testing.T) {
	err := New(Config{}).Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "required")
}

func TestRunReturnsOnCancel(t *testing.T) {
	st := newStore(t)
	s := New(Config{Store: st, Dispatch: func(context.Context, domain.Task) {}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(guard):
		t.Fatal("Run did not return")
	}
}

func TestDescribe(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	next := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	base := domain.Task{ID: 3, Group: "family", Prompt: "water the plants", Status: domain.TaskActive, NextRun: next}
	with := func(f func(*domain.Task)) domain.Task { t := base; f(&t); return t }
	tests := []struct {
		name string
		task domain.Task
		loc  *time.Location
		want string
	}{
		{"interval", with(func(t *domain.Task) { t.ScheduleType, t.ScheduleValue = "interval", "30m" }), loc,
			"#3 family every 30m, next 2026-11-22 09:00 CET — 'water the plants'"},
		{"cron", with(func(t *domain.Task) { t.ScheduleType, t.ScheduleValue = "cron", "0 9 * * *" }), loc,
			"#3 family cron 0 9 * * *, next 2026-11-22 09:00 CET — 'water the plants'"},
		{"once in UTC", with(func(t *domain.Task) { t.ScheduleType, t.ScheduleValue = "once", "2026-11-22T08:00:00Z" }), nil,
			"#3 family once, next 2026-11-22 08:00 UTC — 'water the plants'"},
		{"paused", with(func(t *domain.Task) { t.ScheduleType, t.ScheduleValue, t.Status = "interval", "1h", domain.TaskPaused }), loc,
			"#3 family every 1h, paused — 'water the plants'"},
		{"unscheduled", with(func(t *domain.Task) { t.ScheduleType, t.ScheduleValue, t.NextRun = "once", "x", time.Time{} }), loc,
			"#3 family once, not scheduled — 'water the plants'"},
		{"prompt flattened", with(func(t *domain.Task) {
			t.ScheduleType, t.ScheduleValue, t.Prompt = "interval", "1h", "line one\n\tline\u202e two\x00"
		}), loc, "#3 family every 1h, next 2026-11-22 09:00 CET — 'line one line two'"},
		{"prompt shortened", with(func(t *domain.Task) {
			t.ScheduleType, t.ScheduleValue = "interval", "1h"
			t.Prompt = "ääääääääää ääääääääää ääääääääää ääääääääää ääääääääää ääääääääää"
		}), loc, "#3 family every 1h, next 2026-11-22 09:00 CET — 'ääääääääää ääääääääää ääääääääää ääääääääää ääääääääää ääää…'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Describe(tt.task, tt.loc))
		})
	}
}

func TestCeilMilli(t *testing.T) {
	base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	assert.Equal(t, base, ceilMilli(base))
	assert.Equal(t, base.Add(time.Millisecond), ceilMilli(base.Add(time.Nanosecond)))
	assert.Equal(t, base.Add(time.Millisecond), ceilMilli(base.Add(999*time.Microsecond)))
}
