package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tracker records concurrency: overall and per group.
type tracker struct {
	mu       sync.Mutex
	active   map[string]int
	total    int
	maxTotal int
	overlap  bool // two runs of one group at once
}

func (tr *tracker) enter(group string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.active[group]++
	if tr.active[group] > 1 {
		tr.overlap = true
	}
	tr.total++
	tr.maxTotal = max(tr.maxTotal, tr.total)
}

func (tr *tracker) leave(group string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.active[group]--
	tr.total--
}

// startQueue is a queue running until ctx is done.
func startQueue(ctx context.Context, cfg queueConfig) *queue {
	q := newQueue(cfg)
	q.start(ctx)
	return q
}

func TestConcurrencyBounds(t *testing.T) {
	for _, limit := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr := &tracker{active: map[string]int{}}
			var runs atomic.Int64
			done := make(chan struct{}, 1000)
			q := startQueue(ctx, queueConfig{MaxConcurrent: limit, Pending: func(ctx context.Context, g string) error {
				tr.enter(g)
				time.Sleep(2 * time.Millisecond) // hold the slot so runs overlap if the queue allows it
				tr.leave(g)
				runs.Add(1)
				done <- struct{}{}
				return nil
			}})
			for i := range 40 {
				q.kick(fmt.Sprintf("g%d", i%8))
			}
			// Eight groups, each kicked five times: at least one run per group.
			for range 8 {
				<-done
			}
			cancel()
			q.wait()
			assert.False(t, tr.overlap, "a group ran twice at once")
			assert.LessOrEqual(t, tr.maxTotal, limit)
			assert.GreaterOrEqual(t, runs.Load(), int64(8))
		})
	}
}

func TestKickDuringRunCoalescesIntoOneMoreRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int64
	finished := make(chan struct{}, 10)
	q := startQueue(ctx, queueConfig{MaxConcurrent: 1, Pending: func(ctx context.Context, g string) error {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		finished <- struct{}{}
		return nil
	}})
	q.kick("a")
	<-started
	q.kick("a")
	q.kick("a")
	q.kick("a")
	close(release)
	<-finished
	<-finished
	cancel()
	q.wait()
	assert.Equal(t, int64(2), runs.Load(), "messages arriving during a run are handled by exactly one next run")
}

func TestRetryThenGiveUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var attempts atomic.Int64
	gaveUp := make(chan error, 1)
	q := startQueue(ctx, queueConfig{
		MaxConcurrent: 1,
		Backoff:       []time.Duration{time.Millisecond, time.Millisecond},
		Pending: func(ctx context.Context, g string) error {
			attempts.Add(1)
			return errors.New("sandbox failed")
		},
		GiveUp: func(ctx context.Context, g string, err error) { gaveUp <- err },
	})
	q.kick("a")
	err := <-gaveUp
	require.ErrorContains(t, err, "sandbox failed")
	assert.Equal(t, int64(3), attempts.Load(), "first try plus one per backoff step")
	cancel()
	q.wait()
}

func TestRetrySucceeds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var attempts atomic.Int64
	ok := make(chan struct{})
	q := startQueue(ctx, queueConfig{
		MaxConcurrent: 1,
		Backoff:       []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond},
		Pending: func(ctx context.Context, g string) error {
			if attempts.Add(1) < 3 {
				return errors.New("transient")
			}
			close(ok)
			return nil
		},
		GiveUp: func(ctx context.Context, g string, err error) { t.Errorf("gave up: %v", err) },
	})
	q.kick("a")
	<-ok
	cancel()
	q.wait()
	assert.Equal(t, int64(3), attempts.Load())
}

func TestWorkRunsInOrderAndNeverBesideMessages(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &tracker{active: map[string]int{}}
	var mu sync.Mutex
	var order []string
	done := make(chan struct{})
	q := startQueue(ctx, queueConfig{MaxConcurrent: 4, Pending: func(ctx context.Context, g string) error {
		tr.enter(g)
		defer tr.leave(g)
		mu.Lock()
		order = append(order, "messages")
		mu.Unlock()
		return nil
	}})
	for i := range 3 {
		q.add("a", func(ctx context.Context) error {
			tr.enter("a")
			defer tr.leave("a")
			mu.Lock()
			order = append(order, fmt.Sprintf("task%d", i))
			mu.Unlock()
			if i == 2 {
				close(done)
			}
			return nil
		})
	}
	q.kick("a")
	<-done
	cancel()
	q.wait()
	assert.False(t, tr.overlap)
	mu.Lock()
	defer mu.Unlock()
	var tasks []string
	for _, o := range order {
		if o != "messages" {
			tasks = append(tasks, o)
		}
	}
	assert.Equal(t, []string{"task0", "task1", "task2"}, tasks)
}

func TestPermanentErrorGivesUpAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var attempts atomic.Int64
	errBroken := errors.New("no sandbox")
	gaveUp := make(chan error, 1)
	q := startQueue(ctx, queueConfig{
		MaxConcurrent: 1,
		Backoff:       []time.Duration{time.Hour},
		Pending:       func(ctx context.Context, g string) error { attempts.Add(1); return errBroken },
		GiveUp:        func(ctx context.Context, g string, err error) { gaveUp <- err },
		Permanent:     func(err error) bool { return errors.Is(err, errBroken) },
	})
	q.kick("a")
	require.ErrorIs(t, <-gaveUp, errBroken)
	assert.Equal(t, int64(1), attempts.Load(), "no retry, no hour-long wait")
	cancel()
	q.wait()
}
