package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/clawpen/clawpen/internal/markup"
)

// draftTimeout bounds one draft update: a late draft is worth nothing, the
// next one carries more text.
const draftTimeout = 10 * time.Second

// Draft shows markdown as the answer being written in a private chat
// (sendMessageDraft): updates with the same draftID replace each other
// until the answer itself is sent. Drafts are best effort: one attempt, no
// pacing (they never wait behind, or hold up, the chat's messages), and
// the caller drops a draft that fails. Its HTML form is sent, or the
// markdown as plain text when Telegram cannot parse that HTML.
func (c *Client) Draft(ctx context.Context, chatID int64, threadID int, draftID int64, markdown string) error {
	text := markup.ToHTML(markdown)
	params := &bot.SendMessageDraftParams{ChatID: chatID, MessageThreadID: threadID, DraftID: strconv.FormatInt(draftID, 10),
		Text: text, ParseMode: models.ParseModeHTML}
	if markup.VisibleLen(text) > markup.MaxMessageLen {
		params.Text, params.ParseMode = markdown, ""
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, draftTimeout)
		_, err := c.b.SendMessageDraft(rctx, params)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if params.ParseMode != "" && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "can't parse entities") {
			params.Text, params.ParseMode = markdown, ""
			continue
		}
		return fmt.Errorf("telegram: draft in chat %d: %w", chatID, c.redact(err))
	}
}
