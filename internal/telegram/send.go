package telegram

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/clawpen/clawpen/internal/markup"
)

// MigratedError reports that a group was upgraded to a supergroup with a new id; the
// caller should re-key the chat and send again to NewChatID.
type MigratedError struct {
	ChatID, NewChatID int64
}

func (e *MigratedError) Error() string {
	return fmt.Sprintf("telegram: chat %d migrated to %d", e.ChatID, e.NewChatID)
}

// Migration reports the old and new chat id, for callers that know the error
// only by this method.
func (e *MigratedError) Migration() (from, to int64) { return e.ChatID, e.NewChatID }

// ThrottledError is Telegram's 429: nothing was sent; try again after RetryAfter.
type ThrottledError struct {
	RetryAfter time.Duration
	err        error
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("telegram: rate limited, retry after %s: %v", e.RetryAfter, e.err)
}
func (e *ThrottledError) Unwrap() error { return e.err }

// RetryIn is how long the caller must wait before sending again.
func (e *ThrottledError) RetryIn() time.Duration { return e.RetryAfter }

// RefusedError is an answer a retry cannot change (the bot was removed from the
// chat, the chat does not exist, the message is malformed).
type RefusedError struct{ err error }

func (e *RefusedError) Error() string   { return e.err.Error() }
func (e *RefusedError) Unwrap() error   { return e.err }
func (e *RefusedError) Permanent() bool { return true }

// Send delivers one message: markdown rendered as Telegram HTML, or as plain
// text when its HTML would be longer than a message or Telegram cannot parse
// it. The caller has split the answer into messages (markup.Messages) and
// owns every retry: Send tries once, paced to Telegram's limits, and says
// why it failed (*ThrottledError, *MigratedError, *RefusedError, or another
// error worth retrying). A network error after Telegram accepted the message
// can, rarely, make a retry deliver it twice; nothing can tell those cases apart.
func (c *Client) Send(ctx context.Context, chatID int64, threadID int, markdown string) error {
	text := markup.ToHTML(markdown)
	html := markup.VisibleLen(text) <= markup.MaxMessageLen
	for {
		if err := c.pace.wait(ctx, chatID); err != nil {
			return err
		}
		params := &bot.SendMessageParams{ChatID: chatID, MessageThreadID: threadID, Text: markdown}
		if html {
			params.Text, params.ParseMode = text, models.ParseModeHTML
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		_, err := c.b.SendMessage(rctx, params)
		cancel()
		if err == nil {
			c.log.Debug("sent", "chat_id", chatID, "thread_id", threadID, "len", markup.Len(params.Text), "html", html)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = c.redact(err)
		if html && refusedAs(err, bot.ErrorBadRequest) {
			// Usually "can't parse entities"; also e.g. HTML whose visible
			// text is empty. Nothing was sent: the Markdown source as plain
			// text is the safe second form, not a retry.
			c.log.Warn("HTML rejected, sending as plain text", "chat_id", chatID, "err", err)
			html = false
			continue
		}
		return sendFailure(chatID, "send", err)
	}
}

// sendFailure says why a send to chatID failed: *ThrottledError,
// *MigratedError, *RefusedError (a retry cannot change it), or another
// error worth retrying.
func sendFailure(chatID int64, doing string, err error) error {
	var tooMany *bot.TooManyRequestsError
	var migrated *bot.MigrateError
	switch {
	case errors.As(err, &tooMany):
		return &ThrottledError{RetryAfter: time.Duration(max(tooMany.RetryAfter, 1)) * time.Second, err: err}
	case errors.As(err, &migrated):
		return &MigratedError{ChatID: chatID, NewChatID: int64(migrated.MigrateToChatID)}
	case permanent(err):
		return &RefusedError{err: fmt.Errorf("telegram: %s to chat %d: %w", doing, chatID, err)}
	}
	return fmt.Errorf("telegram: %s to chat %d: %w", doing, chatID, err)
}

// refusedAs reports whether err is Telegram's kind of answer (say
// bot.ErrorBadRequest) and not a throttle or a migration, which sendFailure
// tells apart first.
func refusedAs(err, kind error) bool {
	var tooMany *bot.TooManyRequestsError
	var migrated *bot.MigrateError
	return errors.Is(err, kind) && !errors.As(err, &tooMany) && !errors.As(err, &migrated)
}

// permanent errors are answers that a retry cannot change.
func permanent(err error) bool {
	for _, e := range []error{bot.ErrorBadRequest, bot.ErrorForbidden, bot.ErrorUnauthorized, bot.ErrorNotFound, bot.ErrorConflict} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
