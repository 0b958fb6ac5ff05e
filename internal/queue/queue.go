// Package queue serialises work per group and bounds how many groups run at
// once: one agent per group at a time, at most N sandboxes overall.
package queue

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Work is one unit run for a group (a scheduled task, say).
type Work func(ctx context.Context) error

// Config wires the queue to the host.
type Config struct {
	MaxConcurrent int
	// Pending handles whatever messages a group has waiting. It is called
	// again when new messages arrive while it runs, so it must pick up
	// everything not yet answered each time.
	Pending func(ctx context.Context, group string) error
	// Backoff lists the waits between retries of a failed Pending run;
	// after the last one GiveUp is called.
	Backoff []time.Duration
	// GiveUp is told when a group's messages could not be handled.
	GiveUp func(ctx context.Context, group string, err error)
	// Permanent reports errors that retrying cannot cure: GiveUp at once.
	Permanent func(error) bool
	Logger    *slog.Logger
}

// Queue is safe for concurrent use.
type Queue struct {
	cfg  Config
	slot chan struct{}
	ctx  context.Context
	wg   sync.WaitGroup

	mu     sync.Mutex
	groups map[string]*groupState
}

type groupState struct {
	running bool
	pending bool // messages may be waiting
	work    []Work
}

// Stats is a snapshot for /status.
type Stats struct {
	Running []string       // groups with an active worker
	Waiting map[string]int // queued work items (tasks) per group, plus 1 for pending messages
}

// New starts an empty queue; workers stop when ctx is done.
func New(ctx context.Context, cfg Config) *Queue {
	if cfg.MaxConcurrent < 1 {
		cfg.MaxConcurrent = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Queue{cfg: cfg, slot: make(chan struct{}, cfg.MaxConcurrent), ctx: ctx, groups: map[string]*groupState{}}
}

// Kick says a group may have messages to handle.
func (q *Queue) Kick(group string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.state(group)
	g.pending = true
	q.startLocked(group, g)
}

// Add queues one unit of work for a group, run after what is already queued.
func (q *Queue) Add(group string, w Work) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.state(group)
	g.work = append(g.work, w)
	q.startLocked(group, g)
}

// Wait blocks until every worker has stopped (after the context is done).
func (q *Queue) Wait() { q.wg.Wait() }

// Stats reports what is running and waiting.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Stats{Waiting: map[string]int{}}
	for name, g := range q.groups {
		if g.running {
			s.Running = append(s.Running, name)
		}
		n := len(g.work)
		if g.pending {
			n++
		}
		if n > 0 {
			s.Waiting[name] = n
		}
	}
	return s
}

func (q *Queue) state(group string) *groupState {
	g, ok := q.groups[group]
	if !ok {
		g = &groupState{}
		q.groups[group] = g
	}
	return g
}

func (q *Queue) startLocked(group string, g *groupState) {
	if g.running || q.ctx.Err() != nil {
		return
	}
	g.running = true
	q.wg.Add(1)
	go q.worker(group, g)
}

// worker drains one group's pending messages and work, one at a time.
func (q *Queue) worker(group string, g *groupState) {
	defer q.wg.Done()
	failures := 0
	for {
		q.mu.Lock()
		var next Work
		messages := false
		switch {
		case g.pending:
			g.pending, messages = false, true
		case len(g.work) > 0:
			next, g.work = g.work[0], g.work[1:]
		default:
			g.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()

		if !q.acquire() {
			q.stop(group, g)
			return
		}
		var err error
		if messages {
			err = q.cfg.Pending(q.ctx, group)
		} else {
			err = next(q.ctx)
		}
		<-q.slot

		if q.ctx.Err() != nil {
			q.stop(group, g)
			return
		}
		if !messages {
			if err != nil {
				q.cfg.Logger.Warn("queued work failed", "group", group, "err", err)
			}
			continue
		}
		if err == nil {
			failures = 0
			continue
		}
		q.cfg.Logger.Warn("group run failed", "group", group, "attempt", failures+1, "err", err)
		if failures >= len(q.cfg.Backoff) || (q.cfg.Permanent != nil && q.cfg.Permanent(err)) {
			failures = 0
			if q.cfg.GiveUp != nil {
				q.cfg.GiveUp(q.ctx, group, err)
			}
			continue
		}
		wait := q.cfg.Backoff[failures]
		failures++
		select {
		case <-time.After(wait):
		case <-q.ctx.Done():
			q.stop(group, g)
			return
		}
		q.mu.Lock()
		g.pending = true
		q.mu.Unlock()
	}
}

func (q *Queue) acquire() bool {
	select {
	case q.slot <- struct{}{}:
		return true
	case <-q.ctx.Done():
		return false
	}
}

func (q *Queue) stop(_ string, g *groupState) {
	q.mu.Lock()
	g.running = false
	q.mu.Unlock()
}
