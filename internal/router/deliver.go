package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
)

// WakeDelivery tells the delivery loop that the outbox has new rows.
func (r *Router) WakeDelivery() {
	select {
	case r.deliverWake <- struct{}{}:
	default:
	}
}

// maxSendAttempts bounds retries of one outbox row: Telegram refusing a
// message for good (bot removed from the chat, say) must not block the chat.
const maxSendAttempts = 5

// failedSendWait is how long a chat whose send failed waits before its
// next attempt; other chats are not held up by it.
const failedSendWait = 2 * time.Second

// Deliver sends the outbox until ctx is done: each chat's messages in
// order by a sender of its own, chats independently of each other, so one
// chat's pacing (Telegram allows a message a second per chat, 20 a minute
// per group), 429 waits or retries never delay another chat's answers.
// A row leaves the outbox only once Telegram accepted it.
func (r *Router) Deliver(ctx context.Context) {
	d := &delivery{r: r, active: map[int64]bool{}, attempts: map[int64]int{}}
	var wg sync.WaitGroup
	defer wg.Wait() // senders write to the store, which closes after Deliver
	for {
		pending, err := r.cfg.Store.PendingOutbox(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("read outbox", "err", err)
		}
		for _, chat := range d.idleChats(pending) {
			wg.Go(func() { d.chat(ctx, chat) })
		}
		select {
		case <-ctx.Done():
			return
		case <-r.deliverWake:
		}
	}
}

// delivery is the state the chats' senders share.
type delivery struct {
	r        *Router
	mu       sync.Mutex
	active   map[int64]bool // chats with a sender running
	attempts map[int64]int  // failed sends per outbox row
}

// idleChats marks the chats of pending that have no sender yet as active
// and returns them, in outbox order.
func (d *delivery) idleChats(pending []domain.Outgoing) []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int64
	for _, o := range pending {
		if !d.active[o.ChatID] {
			d.active[o.ChatID] = true
			out = append(out, o.ChatID)
		}
	}
	return out
}

// chat sends one chat's rows until it has none left. It reads them itself,
// after it became the chat's only sender: a row the previous sender
// delivered was marked before that sender stopped, so it is never read
// here again (the caller's snapshot may be older).
func (d *delivery) chat(ctx context.Context, chatID int64) {
	r := d.r
	defer func() {
		d.mu.Lock()
		delete(d.active, chatID)
		d.mu.Unlock()
		// Rows may have arrived for this chat after its last read.
		r.WakeDelivery()
	}()
	for ctx.Err() == nil {
		rows, err := r.cfg.Store.PendingOutboxOf(ctx, chatID)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("read outbox", "chat", chatID, "err", err)
				_ = sleepCtx(ctx, failedSendWait)
			}
			return
		}
		if len(rows) == 0 {
			return
		}
		for _, o := range rows {
			err := r.send(ctx, o)
			d.mu.Lock()
			if err == nil {
				delete(d.attempts, o.ID)
				d.mu.Unlock()
				continue
			}
			d.attempts[o.ID]++
			n := d.attempts[o.ID]
			if n >= maxSendAttempts && ctx.Err() == nil {
				delete(d.attempts, o.ID)
				d.mu.Unlock()
				r.log.Error("dropping undeliverable message", "chat", o.ChatID, "outbox", o.ID, "err", err)
				_ = r.audit(ctx, "", "telegram.send", "error", fmt.Sprintf("message %d to chat %d dropped after %d attempts: %v", o.ID, o.ChatID, n, err))
				_ = r.cfg.Store.MarkSent(ctx, o.ID)
				continue
			}
			d.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("send failed; will retry", "chat", o.ChatID, "outbox", o.ID, "attempt", n, "err", err)
			// Keep this chat's order: later rows wait for this one.
			_ = sleepCtx(ctx, failedSendWait)
			break
		}
	}
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// migration is how a Messenger says a group became a supergroup with a new id.
type migration interface{ Migration() (from, to int64) }

// sendGrace bounds a send that shutdown interrupts: it is finished rather
// than cut, since a cut request may have reached Telegram and would then be
// sent again after the restart.
const sendGrace = 20 * time.Second

func (r *Router) send(parent context.Context, o domain.Outgoing) error {
	if parent.Err() != nil {
		return parent.Err() // shutting down: do not start new sends
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), sendGrace)
	defer cancel()
	_, err := r.cfg.Messenger.Send(ctx, o.ChatID, o.ThreadID, o.Text)
	var mig migration
	if errors.As(err, &mig) {
		from, to := mig.Migration()
		if merr := r.migrate(ctx, from, to); merr != nil {
			return merr
		}
		_, err = r.cfg.Messenger.Send(ctx, to, o.ThreadID, o.Text)
	}
	if err != nil {
		return err
	}
	// Telegram has the message: record that even if shutdown has begun, or a
	// restart would send it again.
	if err := r.cfg.Store.MarkSent(ctx, o.ID); err != nil {
		return fmt.Errorf("mark outbox %d sent: %w", o.ID, err)
	}
	return nil
}
