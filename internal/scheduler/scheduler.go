// Package scheduler runs the loop that hands due scheduled tasks to the
// router, which runs them in their group's queue. Due times live in the store
// (tasks.next_run); the loop keeps one timer set to the earliest of them
// instead of polling, and looks again when told that tasks changed.
//
// A task's next run is persisted before the task is dispatched, so a crash
// during the run never makes the task run again in a loop; a missed run is
// made up once (at-most-once per due time, not at-least-once).
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/retry"
	"github.com/clawpen/clawpen/internal/store"
)

const (
	// earlyWait is how long the loop waits when the store says a task is
	// due but DueTasks has nothing (a timer that fired early against a wall
	// clock that lags): short, but never a busy loop.
	earlyWait = 10 * time.Millisecond
	// maxSleep bounds one wait. Go timers follow the monotonic clock, which
	// stands still while the machine is suspended and ignores wall-clock
	// steps; due times are wall-clock times, so the loop re-checks now and then.
	maxSleep = 5 * time.Minute
	// retryMin and retryMax bound the backoff after a store error.
	retryMin = time.Second
	retryMax = time.Minute
)

// Config configures a Scheduler. Store and Dispatch are required.
type Config struct {
	Store *store.Store
	// Loc is the time zone cron expressions are evaluated in (the host's
	// TZ); nil means time.Local.
	Loc *time.Location
	// MinInterval is the shortest accepted interval. A stored task whose
	// interval falls below it (the limit was raised) is paused.
	MinInterval time.Duration
	// Dispatch hands a due task on (the router's Schedule: the group's
	// queue runs it and logs the TaskRun). It is called from the loop and
	// should return quickly. The task carries its new NextRun (zero for a
	// "once" task, which is marked completed after its run) and LastRun =
	// the dispatch time.
	Dispatch func(ctx context.Context, t domain.Task)
	// Changed receives a value when tasks were created or changed
	// (ops.Service.TasksChanged): the loop re-reads the next due time.
	// nil: only the loop's own timer.
	Changed <-chan struct{}
	Logger  *slog.Logger
	// Now is the wall clock, time.Now if nil; tests inject their own.
	Now func() time.Time
}

// Scheduler is the due-task loop. Create it with New; Run it once.
type Scheduler struct {
	cfg Config
	// sleeping, if set, is told each wait before the loop sleeps; tests
	// use it to know the loop is idle and what it waits for.
	sleeping func(wait time.Duration, timed bool)
}

// New returns a Scheduler for cfg, filling in defaults.
func New(cfg Config) *Scheduler {
	if cfg.Loc == nil {
		cfg.Loc = time.Local
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Scheduler{cfg: cfg}
}

// Run dispatches due tasks until ctx is done, then returns nil. Store
// errors are logged and retried with backoff rather than ending the loop:
// a dead scheduler would silently stop every task.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.cfg.Store == nil || s.cfg.Dispatch == nil {
		return errors.New("scheduler: Store and Dispatch are required")
	}
	backoff := retry.Backoff{First: retryMin, Max: retryMax}
	for {
		wait, timed, err := s.step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			wait, timed = backoff.Next(), true
			s.cfg.Logger.Error("scheduler: store error, retrying", "err", err, "retry_in", wait)
		} else {
			backoff.Reset()
		}
		if !s.sleep(ctx, wait, timed) {
			return nil
		}
	}
}

// step dispatches what is due and says how long to wait for the next due
// task; timed is false when no active task is scheduled.
func (s *Scheduler) step(ctx context.Context) (wait time.Duration, timed bool, err error) {
	n, err := s.runDue(ctx, s.cfg.Now())
	if err != nil {
		return 0, false, err
	}
	next, ok, err := s.cfg.Store.NextDue(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("scheduler: %w", err)
	}
	if !ok {
		return 0, false, nil
	}
	wait = next.Sub(s.cfg.Now())
	if wait <= 0 && n == 0 {
		wait = earlyWait
	}
	return min(max(wait, 0), maxSleep), true, nil
}

// sleep waits for the timer (if timed), a change of tasks or ctx; false
// means ctx is done.
func (s *Scheduler) sleep(ctx context.Context, wait time.Duration, timed bool) bool {
	if s.sleeping != nil {
		s.sleeping(wait, timed)
	}
	var fire <-chan time.Time
	if timed {
		t := time.NewTimer(wait)
		defer t.Stop()
		fire = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.cfg.Changed:
	case <-fire:
	}
	return true
}

// runDue dispatches every task due at now and returns how many it dispatched.
func (s *Scheduler) runDue(ctx context.Context, now time.Time) (int, error) {
	tasks, err := s.cfg.Store.DueTasks(ctx, now)
	if err != nil {
		return 0, fmt.Errorf("scheduler: %w", err)
	}
	n := 0
	for _, t := range tasks {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		ok, err := s.advance(ctx, &t, now)
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		s.cfg.Logger.Info("scheduler: dispatching task", "task", t.ID, "group", t.Group,
			"schedule", t.ScheduleType+" "+t.ScheduleValue, "next_run", t.NextRun)
		s.cfg.Dispatch(ctx, t)
		n++
	}
	return n, nil
}

// advance persists the run after the one now due (before it is dispatched)
// and reports whether t should be dispatched. A schedule that no longer
// parses pauses the task: failing closed beats retrying it forever.
func (s *Scheduler) advance(ctx context.Context, t *domain.Task, now time.Time) (bool, error) {
	spec, perr := ParseSchedule(t.ScheduleType, t.ScheduleValue, s.cfg.Loc, s.cfg.MinInterval)
	if perr != nil {
		if err := s.cfg.Store.SetTaskStatus(ctx, t.ID, domain.TaskPaused); err != nil && !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Errorf("scheduler: pause task %d: %w", t.ID, err)
		}
		s.cfg.Logger.Warn("scheduler: task paused, its schedule does not parse",
			"task", t.ID, "group", t.Group, "reason", perr)
		return false, nil
	}
	var next time.Time // zero: unscheduled; a "once" task is completed by the runner
	if t.ScheduleType != domain.ScheduleOnce {
		nx, done := spec.Next(t.NextRun, now)
		if done {
			s.cfg.Logger.Warn("scheduler: task has no further run", "task", t.ID, "group", t.Group)
		} else {
			next = ceilMilli(nx)
		}
	}
	if err := s.cfg.Store.SetTaskNextRun(ctx, t.ID, next, now); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // deleted meanwhile
		}
		return false, fmt.Errorf("scheduler: %w", err)
	}
	// Narrow the race with a concurrent /pause or /cancel: dispatch only
	// what is still active now that its next run is recorded.
	cur, found, err := s.cfg.Store.Task(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("scheduler: %w", err)
	}
	if !found || cur.Status != domain.TaskActive {
		return false, nil
	}
	*t = cur
	return true, nil
}

// ceilMilli rounds up to the store's millisecond resolution, so a stored
// next run is never at or before the now it was computed from (which would
// make the task due again at once).
func ceilMilli(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); !r.Equal(t) {
		return r.Add(time.Millisecond)
	}
	return t
}
