package router

// The per-group queue serialises work per group and bounds how many groups
// run at once: one agent per group at a time, at most N sandboxes overall.

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/retry"
)

// work is one unit run for a group (a scheduled task, say).
type work func(ctx context.Context) error

// queueConfig is what the queue runs: the router's own methods.
type queueConfig struct {
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

// queue is safe for concurrent use.
type queue struct {
	cfg  queueConfig
	slot chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	ctx    context.Context // set by start: until then work only waits
	groups map[string]*groupState
}

type groupState struct {
	running bool
	pending bool // messages may be waiting
	work    []work
}

// queueStats is a snapshot for /status.
type queueStats struct {
	Running []string       // groups with an active worker
	Waiting map[string]int // queued work items (tasks) per group, plus 1 for pending messages
}

// newQueue returns an empty queue. Work waits until start.
func newQueue(cfg queueConfig) *queue {
	if cfg.MaxConcurrent < 1 {
		cfg.MaxConcurrent = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &queue{cfg: cfg, slot: make(chan struct{}, cfg.MaxConcurrent), groups: map[string]*groupState{}}
}

// start runs the queued work, and what comes later, until ctx is done.
func (q *queue) start(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ctx = ctx
	for group, g := range q.groups {
		q.startLocked(group, g)
	}
}

// kick says a group may have messages to handle.
func (q *queue) kick(group string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.state(group)
	g.pending = true
	q.startLocked(group, g)
}

// add queues one unit of work for a group, run after what is already queued.
func (q *queue) add(group string, w work) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.state(group)
	g.work = append(g.work, w)
	q.startLocked(group, g)
}

// wait blocks until every worker has stopped (after the context is done).
func (q *queue) wait() { q.wg.Wait() }

// stats reports what is running and waiting.
func (q *queue) stats() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := queueStats{Waiting: map[string]int{}}
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

func (q *queue) state(group string) *groupState {
	g, ok := q.groups[group]
	if !ok {
		g = &groupState{}
		q.groups[group] = g
	}
	return g
}

func (q *queue) startLocked(group string, g *groupState) {
	if g.running || q.ctx == nil || q.ctx.Err() != nil || (!g.pending && len(g.work) == 0) {
		return
	}
	g.running = true
	q.wg.Add(1)
	go q.worker(q.ctx, group, g)
}

// worker drains one group's pending messages and work, one at a time.
func (q *queue) worker(ctx context.Context, group string, g *groupState) {
	defer q.wg.Done()
	failures := 0
	for {
		q.mu.Lock()
		var next work
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

		if !q.acquire(ctx) {
			q.stop(group, g)
			return
		}
		var err error
		if messages {
			err = q.cfg.Pending(ctx, group)
		} else {
			err = next(ctx)
		}
		<-q.slot

		if ctx.Err() != nil {
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
				q.cfg.GiveUp(ctx, group, err)
			}
			continue
		}
		wait := q.cfg.Backoff[failures]
		failures++
		if retry.Sleep(ctx, wait) != nil {
			q.stop(group, g)
			return
		}
		q.mu.Lock()
		g.pending = true
		q.mu.Unlock()
	}
}

func (q *queue) acquire(ctx context.Context) bool {
	select {
	case q.slot <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (q *queue) stop(_ string, g *groupState) {
	q.mu.Lock()
	g.running = false
	q.mu.Unlock()
}
