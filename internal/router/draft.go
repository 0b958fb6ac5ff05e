package router

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/markup"
)

// Drafter shows an answer while the agent writes it (Telegram's
// sendMessageDraft in production). One attempt per call: drafts are best
// effort, and the next one carries more text anyway.
type Drafter interface {
	Draft(ctx context.Context, chatID int64, threadID int, draftID int64, markdown string) error
}

// draftEvery is the least time between two draft updates of a run.
const draftEvery = 300 * time.Millisecond

// draftFailures refused drafts in a row end a run's drafts: a chat or bot
// that cannot have them (Telegram refuses drafts to some) is not asked
// three times a second for the whole run.
const draftFailures = 3

// liveDraft shows one run's answer as it grows. update never blocks (it is
// called while the agent's output is read); one goroutine sends, one draft
// at a time, at most one per every, only when the text changed: what
// arrives while a draft is in flight or waiting for its turn replaces the
// text not yet shown. Nothing it does touches the answer itself, which
// goes through the outbox whatever happens to the drafts.
type liveDraft struct {
	send  func(ctx context.Context, text string) error
	every time.Duration
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
	log   *slog.Logger

	mu     sync.Mutex
	latest string
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func newLiveDraft(send func(ctx context.Context, text string) error, log *slog.Logger) *liveDraft {
	return &liveDraft{send: send, every: draftEvery, now: time.Now, after: time.After, log: log,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// start sends drafts until stop or ctx's end.
func (d *liveDraft) start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	go d.run(ctx)
}

// update takes the answer so far.
func (d *liveDraft) update(text string) {
	d.mu.Lock()
	d.latest = text
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is pending; it will read the latest text
	}
}

// stop ends the drafts once the answer is there: a draft in flight is
// cancelled (its call returns at once) and none follows, so no draft lands
// after the answer's own message.
func (d *liveDraft) stop() {
	d.once.Do(func() {
		d.cancel()
		<-d.done
	})
}

func (d *liveDraft) run(ctx context.Context) {
	defer close(d.done)
	var shown string
	var last time.Time
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		}
		if !last.IsZero() {
			if wait := d.every - d.now().Sub(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-d.after(wait):
				}
			}
		}
		d.mu.Lock()
		text := d.latest
		d.mu.Unlock()
		if text == shown || text == "" {
			continue
		}
		last, shown = d.now(), text
		err := d.send(ctx, text)
		switch {
		case err == nil:
			failed = 0
		case ctx.Err() != nil:
			return
		default:
			failed++
			d.log.Debug("draft not shown", "err", err, "in_a_row", failed)
			if failed >= draftFailures {
				d.log.Info("drafts refused; none more for this run", "err", err)
				return
			}
		}
	}
}

// startDraft begins the live draft of a run of g, or returns nil: drafts
// are shown in the main group's chat (the owner's private chat, the only
// kind of chat Telegram shows them in) and for its own run only.
func (r *Router) startDraft(ctx context.Context, g domain.Group, thread int, draftID int64) *liveDraft {
	if r.cfg.Drafts == nil || !g.IsMain() || draftID == 0 {
		return nil
	}
	audited := false // one goroutine sends: no lock
	d := newLiveDraft(func(ctx context.Context, text string) error {
		shown := r.draftText(ctx, g, text, &audited)
		if shown == "" {
			return nil // all of it may still become a secret: the next draft shows it
		}
		return r.cfg.Drafts.Draft(ctx, g.ChatID, thread, draftID, draftPart(shown))
	}, r.log.With("group", g.Folder))
	d.start(ctx)
	return d
}

// draftPart is what a draft shows of a long answer: the message being
// written, the last of those the answer will be split into.
func draftPart(text string) string {
	parts := markup.Messages(text, markup.MaxMessageLen)
	if len(parts) == 0 {
		return text
	}
	return parts[len(parts)-1]
}
