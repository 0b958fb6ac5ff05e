package telegram

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPacer(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type step struct {
		chat int64
		at   time.Duration
		want time.Duration // 0: admitted; else the wait it asks for
	}
	tests := []struct {
		name  string
		cfg   Pacing
		steps []step
	}{
		{"one per second per chat", Pacing{}, []step{
			{5, 0, 0}, {5, 300 * time.Millisecond, 700 * time.Millisecond}, {5, time.Second, 0},
		}},
		{"chats are independent", Pacing{}, []step{
			{5, 0, 0}, {6, 0, 0}, {7, 0, 0},
		}},
		{"twenty a minute per group", Pacing{PerChatInterval: -1}, func() []step {
			var s []step
			for i := range 20 {
				s = append(s, step{-100, time.Duration(i) * time.Second, 0})
			}
			// The 21st must wait until the first leaves the minute window.
			s = append(s, step{-100, 20 * time.Second, 40 * time.Second}, step{-100, time.Minute, 0})
			// A private chat is not limited per minute.
			for i := range 25 {
				s = append(s, step{5, time.Minute + time.Duration(i)*time.Millisecond, 0})
			}
			return s
		}()},
		{"thirty a second overall", Pacing{PerChatInterval: -1}, func() []step {
			var s []step
			for i := range 30 {
				s = append(s, step{int64(i + 1), 0, 0})
			}
			return append(s, step{99, 500 * time.Millisecond, 500 * time.Millisecond}, step{99, time.Second, 0})
		}()},
		{"all off", Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1}, func() []step {
			var s []step
			for range 100 {
				s = append(s, step{-100, 0, 0})
			}
			return s
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPacer(tt.cfg)
			for i, s := range tt.steps {
				assert.Equal(t, s.want, p.reserve(s.chat, at(s.at)), "step %d", i)
			}
		})
	}
}

func TestPacerPrunesIdleChats(t *testing.T) {
	p := newPacer(Pacing{GlobalPerSecond: -1})
	t0 := time.Now()
	for i := range 1001 {
		require.Zero(t, p.reserve(int64(i+1), t0))
	}
	require.Zero(t, p.reserve(5000, t0.Add(2*time.Minute)))
	assert.Len(t, p.chats, 1)
}

func TestPacerWaitHonoursContext(t *testing.T) {
	p := newPacer(Pacing{PerChatInterval: time.Hour})
	require.NoError(t, p.wait(context.Background(), 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.wait(ctx, 1), context.Canceled)
}

func BenchmarkPacerReserve(b *testing.B) {
	p := newPacer(Pacing{PerChatInterval: -1, GroupPerMinute: -1, GlobalPerSecond: -1})
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		p.reserve(int64(i%50), now)
	}
}
