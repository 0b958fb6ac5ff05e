// Package retry is what the host's retry loops share: a wait that doubles
// with each failure in a row, and a sleep that ends early with its context.
// What to retry, and when to give up, stays with each loop: it owns the state.
package retry

import (
	"context"
	"time"
)

// Backoff is the wait after each failure in a row: First, doubled per
// failure, at most Max. Reset it after a success.
type Backoff struct {
	First, Max time.Duration
	failures   int
}

// Next counts a failure and returns how long to wait before trying again.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return Delay(b.First, b.Max, b.failures)
}

// Reset forgets the failures: the next one waits First again.
func (b *Backoff) Reset() { b.failures = 0 }

// Delay is the wait after the nth failure in a row (n ≥ 1): first doubled
// n-1 times, at most limit.
func Delay(first, limit time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Sleep waits d, or until ctx is done, in which case it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Until calls try until it succeeds, waiting b's doubling delays between
// failures, each told to failed with the wait that follows it. It returns
// nil once try succeeded, or ctx.Err() once ctx is done.
func Until(ctx context.Context, b Backoff, try func() error, failed func(err error, wait time.Duration)) error {
	for {
		err := try()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.Next()
		failed(err, d)
		if serr := Sleep(ctx, d); serr != nil {
			return serr
		}
	}
}
