package router

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/retry"
)

// wakeDelivery makes the delivery loop read the outbox again (a chat's
// sender stopped; rows may have come for it meanwhile).
func (r *Router) wakeDelivery() {
	select {
	case r.deliverWake <- struct{}{}:
	default:
	}
}

// Delivery is the only retry layer for outgoing messages: the Messenger tries
// once, and the chat's sender decides what a failure means. A throttled send
// waits Telegram's retry_after and does not count as a failure. A refused one
// (the bot was removed from the chat, say) is dropped at once. Anything else
// is retried with a doubling wait, and dropped after maxSendAttempts, so one
// undeliverable message cannot block its chat forever while a network outage
// of a quarter of an hour loses nothing.
const (
	maxSendAttempts = 20
	firstRetryWait  = 500 * time.Millisecond
	maxRetryWait    = time.Minute
)

// Recording that a row is done (Telegram accepted it, or delivery gave up
// on it) is retried alone, never by sending again: recordTimeout bounds
// each attempt (the store's busy timeout is 5 s), recordFirstWait doubling
// to recordMaxWait is the wait between them.
const (
	recordTimeout   = 15 * time.Second
	recordFirstWait = 200 * time.Millisecond
	recordMaxWait   = 10 * time.Second
)

// deliver sends the outbox until ctx is done: each chat's messages in
// order by a sender of its own, chats independently of each other, so one
// chat's pacing (Telegram allows a message a second per chat, 20 a minute
// per group), 429 waits or retries never delay another chat's answers.
// A row leaves the outbox only once Telegram accepted it. The store says
// when rows were queued, by whom ever: an answer, a notice, an agent's
// send_message.
func (r *Router) deliver(ctx context.Context) {
	d := r.delivery
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
		case <-r.cfg.Store.OutboxQueued():
		case <-r.deliverWake:
		}
	}
}

// delivery is the state the chats' senders share.
type delivery struct {
	r        *Router
	mu       sync.Mutex     // guards the following
	active   map[int64]bool // chats with a sender running
	attempts map[int64]int  // failed sends per outbox row
	// held are the rows a sender is sending, or is done with (sent or given
	// up) until the outbox records it, with the record's last error (nil
	// before one failed): no other sender sends them.
	held map[int64]error
}

func newDelivery(r *Router) *delivery {
	return &delivery{r: r, active: map[int64]bool{}, attempts: map[int64]int{}, held: map[int64]error{}}
}

// unrecorded is how many rows Telegram accepted (or delivery gave up on)
// the outbox failed to record so far, and the last of its errors.
func (d *delivery) unrecorded() (n int, last error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, err := range d.held {
		if err != nil {
			n, last = n+1, err
		}
	}
	return n, last
}

// idleChats marks the chats of pending that have no sender yet as active
// and returns them, in outbox order.
func (d *delivery) idleChats(pending []domain.Outgoing) []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int64
	for _, o := range pending {
		if _, held := d.held[o.ID]; !held && !d.active[o.ChatID] {
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
		r.wakeDelivery()
	}()
	for ctx.Err() == nil {
		rows, err := r.cfg.Store.PendingOutboxOf(ctx, chatID)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("read outbox", "chat", chatID, "err", err)
				_ = retry.Sleep(ctx, firstRetryWait)
			}
			return
		}
		rows = d.notHeld(rows)
		if len(rows) == 0 {
			return
		}
		for _, o := range rows {
			wait, ok := d.sent(ctx, o)
			if ok {
				continue
			}
			if ctx.Err() != nil {
				return
			}
			// Keep this chat's order: later rows wait for this one.
			_ = retry.Sleep(ctx, wait)
			break
		}
	}
}

// notHeld is rows without those another sender holds (the chat id of a
// row may change under it: a supergroup migration).
func (d *delivery) notHeld(rows []domain.Outgoing) []domain.Outgoing {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.DeleteFunc(rows, func(o domain.Outgoing) bool { _, held := d.held[o.ID]; return held })
}

// hold marks row id as held by its sender, or no longer.
func (d *delivery) hold(id int64, held bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if held {
		d.held[id] = nil
	} else {
		delete(d.held, id)
	}
}

// sent sends one row and reports whether the chat may go on with its next
// row; when not, wait is how long to wait before trying this row again.
func (d *delivery) sent(ctx context.Context, o domain.Outgoing) (wait time.Duration, ok bool) {
	r := d.r
	d.hold(o.ID, true)
	err := r.send(ctx, o)
	if err == nil {
		r.cfg.Observer.Sent("sent")
		return 0, d.record(ctx, o)
	}
	wait, attempts := time.Duration(0), 0
	if ctx.Err() == nil {
		wait, attempts = d.failed(o, err)
	}
	if attempts == 0 {
		d.hold(o.ID, false) // to be sent again
		return wait, false
	}
	// Given up: the audit log says why, and the row leaves the outbox.
	r.cfg.Observer.Sent("dropped")
	r.log.Error("dropping undeliverable message", "chat", o.ChatID, "outbox", o.ID, "attempts", attempts, "err", err)
	_ = r.audit(ctx, "", "telegram.send", "error", fmt.Sprintf("message %d to chat %d dropped after %d attempts: %v", o.ID, o.ChatID, attempts, err))
	return 0, d.record(ctx, o)
}

// failed counts o's failed send and says how long to wait before trying
// it again, or, when delivery gives up on it (gaveUp > 0), after how many
// attempts.
func (d *delivery) failed(o domain.Outgoing, err error) (wait time.Duration, gaveUp int) {
	r := d.r
	var throttled interface{ RetryIn() time.Duration }
	var refused interface{ Permanent() bool }
	switch {
	case errors.As(err, &throttled):
		r.log.Warn("Telegram asks to wait", "chat", o.ChatID, "outbox", o.ID, "retry_after", throttled.RetryIn())
		r.cfg.Observer.Sent("throttled")
		return throttled.RetryIn(), 0
	case errors.As(err, &refused) && refused.Permanent():
		return 0, 1
	}
	d.mu.Lock()
	d.attempts[o.ID]++
	n := d.attempts[o.ID]
	d.mu.Unlock()
	if n >= maxSendAttempts {
		return 0, n
	}
	r.cfg.Observer.Sent("failed")
	wait = retry.Delay(firstRetryWait, maxRetryWait, n)
	r.log.Warn("send failed; will retry", "chat", o.ChatID, "outbox", o.ID, "attempt", n, "in", wait, "err", err)
	return wait, 0
}

// record takes o out of the outbox once delivery is done with it (sent,
// or given up). A failing store (disk full, read-only, locked) does not
// make o go out again: o stays held, which no sender sends, and the
// record alone is retried, each attempt with a deadline of its own (the
// send's may be spent), until it works or ctx ends. The chat's later rows
// wait meanwhile, so at most one of its messages is in the window a crash
// sends again; other chats' senders go on. It reports whether o was
// recorded.
func (d *delivery) record(ctx context.Context, o domain.Outgoing) bool {
	r := d.r
	d.mu.Lock()
	delete(d.attempts, o.ID)
	d.mu.Unlock()
	err := retry.Until(ctx, retry.Backoff{First: recordFirstWait, Max: recordMaxWait},
		func() error {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
			defer cancel()
			return r.cfg.Store.MarkSent(rctx, o.ID)
		},
		func(err error, wait time.Duration) {
			d.mu.Lock()
			d.held[o.ID] = err
			d.mu.Unlock()
			r.cfg.Observer.RecordFailed()
			r.log.Error("recording an outbox row as done failed; retrying the record, not the send",
				"chat", o.ChatID, "outbox", o.ID, "in", wait, "err", err)
		})
	if err != nil {
		r.log.Error("stopping before an outbox row done with was recorded: the next start sends it again", "chat", o.ChatID, "outbox", o.ID)
		return false
	}
	d.hold(o.ID, false)
	return true
}

// migration is how a Messenger says a group became a supergroup with a new id.
type migration interface{ Migration() (from, to int64) }

// sendGrace bounds a send that shutdown interrupts: it is finished rather
// than cut, since a cut request may have reached Telegram and would then be
// sent again after the restart.
const sendGrace = 20 * time.Second

// fileSendGrace is sendGrace for a file: an upload of up to 50 MB.
const fileSendGrace = 5 * time.Minute

func (r *Router) send(parent context.Context, o domain.Outgoing) error {
	if parent.Err() != nil {
		return parent.Err() // shutting down: do not start new sends
	}
	grace := sendGrace
	var data []byte
	if o.Kind != "" {
		var err error
		if data, err = r.cfg.Store.OutboxFile(parent, o.ID); err != nil {
			return err
		}
		grace = fileSendGrace
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), grace)
	defer cancel()
	// The last look before Telegram: whatever queued the row.
	o.Text = r.redactRow(ctx, o)
	if o.Kind != "" {
		if data = r.guardFile(ctx, o, data); data == nil {
			o.Kind, o.Text = "", withheldFile(o.FileName)
		}
	}
	one := func(chatID int64) error {
		if o.Kind != "" {
			return r.cfg.Messenger.SendFile(ctx, chatID, o.ThreadID, o.Kind, o.FileName, data, o.Text)
		}
		return r.cfg.Messenger.Send(ctx, chatID, o.ThreadID, o.Text)
	}
	err := one(o.ChatID)
	var mig migration
	if errors.As(err, &mig) {
		from, to := mig.Migration()
		if merr := r.migrate(ctx, from, to); merr != nil {
			return merr
		}
		err = one(to)
	}
	return err
}
