package approval

import (
	"context"
	"fmt"
	"strings"

	"github.com/clawpen/clawpen/internal/domain"
)

// A button's data: "ap:<request id>:<choice>".
const (
	choiceOnce  = "o"
	choiceGroup = "g"
	choiceDeny  = "d"
)

func data(id, choice string) string { return "ap:" + id + ":" + choice }

// parseData reads a button's data; ok is false for anything else.
func parseData(s string) (id, choice string, ok bool) {
	rest, ok := strings.CutPrefix(s, "ap:")
	if !ok {
		return "", "", false
	}
	id, choice, ok = strings.Cut(rest, ":")
	if !ok || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", "", false
	}
	switch choice {
	case choiceOnce, choiceGroup, choiceDeny:
		return id, choice, true
	}
	return "", "", false
}

// Press handles a press of an inline button. It counts only when it is
// the owner's, on the message that asks the request its data names, while
// that request waits, and for a choice the message offers; every other
// press is answered with why not, audited, and changes nothing. An error
// means it could not be read from or written to the store: the press is
// offered again.
func (b *Broker) Press(ctx context.Context, pr domain.Press) error {
	owner, err := b.cfg.Owner(ctx)
	if err != nil {
		return err
	}
	refuse := func(group, why, answer string) error {
		b.audit(ctx, group, "approval.press", "", "deny", fmt.Sprintf("press by user %d on message %d of chat %d: %s", pr.From, pr.MessageID, pr.ChatID, why))
		b.answer(ctx, pr.ID, answer)
		return nil
	}
	id, choice, ok := parseData(pr.Data)
	if !ok {
		return refuse("", fmt.Sprintf("data %q is no request's button", clip(pr.Data)), "This button is not one of mine.")
	}
	b.mu.Lock()
	p := b.pending[id]
	b.mu.Unlock()
	var chat, msg int64
	if p != nil {
		// A press can come back before Telegram's answer to the send has:
		// the message it is on is known only then.
		select {
		case <-p.sent:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
		chat, msg = p.chat, p.msg
		b.mu.Unlock()
	}
	if p == nil {
		a, found, err := b.cfg.Store.ApprovalByID(ctx, id)
		switch {
		case err != nil:
			return err
		case !found:
			return refuse("", "no request has the id "+shortID(id), "I know of no such request.")
		case pr.From != owner:
			return refuse(a.Group, "not the owner", "Only the owner can answer this.")
		}
		if a.Decision == "" {
			// Decided a moment ago; its record is being written.
			return refuse(a.Group, fmt.Sprintf("request %s was already decided", shortID(id)), "This request was already decided.")
		}
		if a.MessageID == 0 && pr.ChatID == owner && pr.MessageID != 0 {
			// A host that died between sending the question and recording
			// it: the owner's press names the message, which says so now.
			b.expiredMessage(ctx, a, pr.ChatID, pr.MessageID)
		}
		return refuse(a.Group, fmt.Sprintf("request %s was already decided: %s", shortID(id), a.Decision), "This request was already decided: "+a.Decision+".")
	}
	group := p.req.group
	switch {
	case pr.From != owner:
		return refuse(group, "not the owner", "Only the owner can answer this.")
	case msg == 0 || pr.ChatID != chat || pr.MessageID != msg:
		return refuse(group, fmt.Sprintf("request %s was asked on message %d of chat %d", shortID(id), msg, chat), "This button does not belong to that request.")
	case choice == choiceGroup && p.req.egress == nil:
		return refuse(group, "allow for the group is not offered for "+p.req.subject, "That is not one of this request's choices.")
	}
	v := verdict{decision: deny, by: pr.From, at: b.cfg.Now()}
	answer := "Denied."
	switch choice {
	case choiceOnce:
		v.decision, answer = allowOnce, "Allowed once."
	case choiceGroup:
		v.decision, answer = allowGroup, "Allowed for "+group+"."
	}
	if !b.decide(p, v) {
		return refuse(group, fmt.Sprintf("request %s was already decided", shortID(id)), "This request was already decided.")
	}
	b.answer(ctx, pr.ID, answer)
	return nil
}

// answer answers a press; a failure only costs the presser a spinner.
func (b *Broker) answer(ctx context.Context, id, text string) {
	if err := b.cfg.Messenger.AnswerPress(ctx, id, text); err != nil {
		b.log.Warn("answer a button press", "err", err)
	}
}

// clip bounds untrusted data for the audit log.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
