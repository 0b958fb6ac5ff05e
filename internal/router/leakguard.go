package router

import (
	"bytes"
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/leakguard"
)

// The leak guard on what the router sends (DESIGN.md, "Credentials for
// outside services"): the host's secrets are redacted from answers, task
// results, drafts, every message and caption as it is sent, and files sent
// as documents. An answer is redacted whole before it is split into
// messages, so a secret cut by a split is still found.

// redact is text with the host's secrets replaced by [redacted]; a find is
// logged and audited as going to where.
func (r *Router) redact(ctx context.Context, group, where, text string) string {
	out, f := r.cfg.Guard.Redact(text)
	if f.Found() {
		r.auditLeak(ctx, group, fmt.Sprintf("redacted %s from %s", f, where))
	}
	return out
}

func (r *Router) auditLeak(ctx context.Context, group, reason string) {
	r.log.Warn("leak guard", "group", group, "reason", reason)
	_ = r.audit(context.WithoutCancel(ctx), group, "leakguard", "deny", reason)
}

// folderOf is the group of a chat, for the audit log ("" when none is).
func (r *Router) folderOf(ctx context.Context, chatID int64) string {
	g, _, _ := r.cfg.Store.GroupByChat(ctx, chatID)
	return g.Folder
}

// redactRow is redact for an outbox row: its group is looked up only when
// something was found.
func (r *Router) redactRow(ctx context.Context, o domain.Outgoing) string {
	out, f := r.cfg.Guard.Redact(o.Text)
	if f.Found() {
		r.auditLeak(ctx, r.folderOf(ctx, o.ChatID), fmt.Sprintf("redacted %s from a message to chat %d", f, o.ChatID))
	}
	return out
}

// guardFile is what of a file the chat may get: a text file (UTF-8, no
// NUL) with the secrets redacted, or, for any other file holding one, nil:
// its bytes cannot be redacted without breaking it, so it is not sent.
func (r *Router) guardFile(ctx context.Context, o domain.Outgoing, data []byte) []byte {
	f := r.cfg.Guard.Scan(data)
	if !f.Found() {
		return data
	}
	if utf8.Valid(data) && bytes.IndexByte(data, 0) < 0 {
		out, _ := r.cfg.Guard.Redact(string(data))
		r.auditLeak(ctx, r.folderOf(ctx, o.ChatID), fmt.Sprintf("redacted %s from the file %q to chat %d", f, o.FileName, o.ChatID))
		return []byte(out)
	}
	r.auditLeak(ctx, r.folderOf(ctx, o.ChatID), fmt.Sprintf("withheld the file %q to chat %d: it holds %s", o.FileName, o.ChatID, f))
	return nil
}

// withheldFile is the message sent instead of a file that held a secret.
func withheldFile(name string) string {
	return fmt.Sprintf("The file %q was not sent: it holds a secret of the host's (%s).", name, leakguard.Redacted)
}

// draftText is what a draft of a growing answer may show: without an end
// that could still become a secret, and redacted. audited reports finds
// once per run (the answer itself is audited when it is stored).
func (r *Router) draftText(ctx context.Context, g domain.Group, text string, audited *bool) string {
	text = text[:len(text)-r.cfg.Guard.Pending(text)]
	out, f := r.cfg.Guard.Redact(text)
	if f.Found() && !*audited {
		*audited = true
		r.auditLeak(ctx, g.Folder, fmt.Sprintf("redacted %s from a draft to chat %d", f, g.ChatID))
	}
	return out
}
