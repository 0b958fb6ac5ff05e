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

// Deliver sends the outbox until ctx is done: chats in parallel, each chat's
// messages in order. A row leaves the outbox only once Telegram accepted it.
func (r *Router) Deliver(ctx context.Context) {
	attempts := map[int64]int{}
	var mu sync.Mutex
	for {
		pending, err := r.cfg.Store.PendingOutbox(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("read outbox", "err", err)
		}
		byChat := map[int64][]domain.Outgoing{}
		var order []int64
		for _, o := range pending {
			if _, ok := byChat[o.ChatID]; !ok {
				order = append(order, o.ChatID)
			}
			byChat[o.ChatID] = append(byChat[o.ChatID], o)
		}
		failed := false
		var wg sync.WaitGroup
		for _, chat := range order {
			wg.Add(1)
			go func(rows []domain.Outgoing) {
				defer wg.Done()
				for _, o := range rows {
					err := r.send(ctx, o)
					if err == nil {
						continue
					}
					mu.Lock()
					attempts[o.ID]++
					n := attempts[o.ID]
					failed = true
					mu.Unlock()
					if n >= maxSendAttempts && ctx.Err() == nil {
						r.log.Error("dropping undeliverable message", "chat", o.ChatID, "outbox", o.ID, "err", err)
						_ = r.audit(ctx, "", "telegram.send", "error", fmt.Sprintf("message %d to chat %d dropped after %d attempts: %v", o.ID, o.ChatID, n, err))
						_ = r.cfg.Store.MarkSent(ctx, o.ID)
						continue
					}
					r.log.Warn("send failed; will retry", "chat", o.ChatID, "outbox", o.ID, "attempt", n, "err", err)
					return // keep this chat's order: later rows wait for this one
				}
			}(byChat[chat])
		}
		wg.Wait()
		wait := time.Duration(0)
		if failed {
			wait = 2 * time.Second
		}
		if len(pending) == 0 || failed {
			var timer <-chan time.Time
			if failed {
				timer = time.After(wait)
			}
			select {
			case <-ctx.Done():
				return
			case <-r.deliverWake:
			case <-timer:
			}
		}
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
