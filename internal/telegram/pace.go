package telegram

import (
	"context"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/retry"
)

// Pacing sets the send rate limits. Zero fields take Telegram's documented limits; a
// negative field switches that limit off (for tests that send a lot).
type Pacing struct {
	PerChatInterval time.Duration // min time between two messages to one chat; default 1s
	GroupPerMinute  int           // messages per minute to one group (chat id < 0); default 20
	GlobalPerSecond int           // messages per second over all chats; default 30
}

// window admits at most n events in any span of length per. It is a token bucket whose
// tokens come back exactly `per` after being spent, which makes "at most 20 a minute"
// exact (a classic refilling bucket would allow bursts above it).
type window struct {
	n     int
	per   time.Duration
	times []time.Time // the last n admitted events, oldest first
}

func newWindow(n int, per time.Duration) *window {
	if n <= 0 || per <= 0 {
		return nil
	}
	return &window{n: n, per: per}
}

// delay is how long until one more event is admitted.
func (w *window) delay(now time.Time) time.Duration {
	if w == nil || len(w.times) < w.n {
		return 0
	}
	return max(w.times[0].Add(w.per).Sub(now), 0)
}

func (w *window) record(now time.Time) {
	if w == nil {
		return
	}
	w.times = append(w.times, now)
	if len(w.times) > w.n {
		w.times = w.times[1:]
	}
}

// idle reports whether the window no longer constrains anything.
func (w *window) idle(now time.Time) bool {
	return w == nil || len(w.times) == 0 || now.Sub(w.times[len(w.times)-1]) >= w.per
}

type chatWindows struct{ perChat, group *window }

type pacer struct {
	mu     sync.Mutex
	cfg    Pacing
	global *window
	chats  map[int64]*chatWindows
}

func newPacer(cfg Pacing) *pacer {
	if cfg.PerChatInterval == 0 {
		cfg.PerChatInterval = time.Second
	}
	if cfg.GroupPerMinute == 0 {
		cfg.GroupPerMinute = 20
	}
	if cfg.GlobalPerSecond == 0 {
		cfg.GlobalPerSecond = 30
	}
	return &pacer{cfg: cfg, global: newWindow(cfg.GlobalPerSecond, time.Second), chats: map[int64]*chatWindows{}}
}

// reserve admits one message to chatID at now and returns 0, or returns how long to
// wait before asking again (and admits nothing).
func (p *pacer) reserve(chatID int64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	cw := p.chats[chatID]
	if cw == nil {
		cw = &chatWindows{perChat: newWindow(1, p.cfg.PerChatInterval)}
		if chatID < 0 {
			cw.group = newWindow(p.cfg.GroupPerMinute, time.Minute)
		}
		p.chats[chatID] = cw
	}
	d := max(p.global.delay(now), cw.perChat.delay(now), cw.group.delay(now))
	if d > 0 {
		return d
	}
	p.global.record(now)
	cw.perChat.record(now)
	cw.group.record(now)
	if len(p.chats) > 1000 {
		p.pruneLocked(now)
	}
	return 0
}

// pruneLocked forgets chats whose windows are all idle, so the map stays small.
func (p *pacer) pruneLocked(now time.Time) {
	for id, cw := range p.chats {
		if cw.perChat.idle(now) && cw.group.idle(now) {
			delete(p.chats, id)
		}
	}
}

// wait blocks until a message to chatID may be sent, and reserves it.
func (p *pacer) wait(ctx context.Context, chatID int64) error {
	for {
		d := p.reserve(chatID, time.Now())
		if d == 0 {
			return nil
		}
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
	}
}
