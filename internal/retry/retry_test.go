package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelay(t *testing.T) {
	tests := []struct {
		name         string
		first, limit time.Duration
		n            int
		want         time.Duration
	}{
		{"first failure", time.Second, time.Minute, 1, time.Second},
		{"doubles", time.Second, time.Minute, 3, 4 * time.Second},
		{"capped", time.Second, time.Minute, 7, time.Minute},
		{"no overflow after many", time.Minute, time.Hour, 1000, time.Hour},
		{"zero and below count as the first", time.Second, time.Minute, 0, time.Second},
		{"first above limit", time.Hour, time.Minute, 1, time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Delay(tc.first, tc.limit, tc.n))
		})
	}
}

func TestBackoffDoublesAndResets(t *testing.T) {
	b := Backoff{First: 100 * time.Millisecond, Max: 300 * time.Millisecond}
	var got []time.Duration
	for range 4 {
		got = append(got, b.Next())
	}
	assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}, got)
	b.Reset()
	assert.Equal(t, 100*time.Millisecond, b.Next())
}

func TestSleep(t *testing.T) {
	assert.NoError(t, Sleep(context.Background(), 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour: only the context can end it while the test runs.
	assert.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled)
}

func TestUntil(t *testing.T) {
	fails := 3
	var waits []time.Duration
	err := Until(context.Background(), Backoff{First: time.Millisecond, Max: 2 * time.Millisecond},
		func() error {
			if fails > 0 {
				fails--
				return errors.New("not yet")
			}
			return nil
		},
		func(_ error, d time.Duration) { waits = append(waits, d) })
	assert.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 2 * time.Millisecond}, waits)

	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err = Until(ctx, Backoff{First: time.Hour, Max: time.Hour},
		func() error { tries++; return errors.New("never") },
		func(error, time.Duration) { cancel() })
	assert.ErrorIs(t, err, context.Canceled, "a done context ends the wait")
	assert.Equal(t, 1, tries)
}
