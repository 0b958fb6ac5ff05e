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

// Retry bounds for one chunk.
const (
	maxServerAttempts = 4  // network errors and 5xx answers
	maxThrottled      = 10 // 429 answers, each waited out
)

// MigratedError reports that a group was upgraded to a supergroup with a new id; the
// caller should re-key the chat and send again to NewChatID.
type MigratedError struct {
	ChatID, NewChatID int64
}

func (e *MigratedError) Error() string {
	return fmt.Sprintf("telegram: chat %d migrated to %d", e.ChatID, e.NewChatID)
}

// Send delivers markdown to the chat (and forum topic when threadID != 0), split into
// chunks with markup.Chunks(markdown, 4096), each sent as HTML with a plain-text
// fallback. It returns how many chunks were delivered: on error, chunks [0, delivered)
// are in the chat, and a caller that retries should resend only the rest — use
// markup.Chunks and SendChunks(chunks[delivered:]) for that.
func (c *Client) Send(ctx context.Context, chatID int64, threadID int, markdown string) (delivered int, err error) {
	return c.SendChunks(ctx, chatID, threadID, markup.Chunks(markdown, markup.MaxMessageLen))
}

// SendChunks delivers prepared chunks in order and reports how many were delivered.
func (c *Client) SendChunks(ctx context.Context, chatID int64, threadID int, chunks []markup.Chunk) (delivered int, err error) {
	for i, ch := range chunks {
		if err := c.sendChunk(ctx, chatID, threadID, ch); err != nil {
			return i, fmt.Errorf("telegram: chunk %d of %d to chat %d: %w", i+1, len(chunks), chatID, err)
		}
	}
	return len(chunks), nil
}

// sendChunk sends one chunk: paced, retried on 429 (after retry_after) and on network
// or server errors (with backoff), and resent as plain text when Telegram cannot parse
// the HTML. A network error after Telegram accepted the message can, rarely, make a
// retry deliver the chunk twice; nothing can tell those cases apart.
func (c *Client) sendChunk(ctx context.Context, chatID int64, threadID int, ch markup.Chunk) error {
	html := ch.HTML != ""
	var serverErrs, throttled int
	var bo backoff
	for {
		if err := c.pace.wait(ctx, chatID); err != nil {
			return err
		}
		params := &bot.SendMessageParams{ChatID: chatID, MessageThreadID: threadID, Text: ch.Plain}
		if html {
			params.Text, params.ParseMode = ch.HTML, models.ParseModeHTML
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
		var tooMany *bot.TooManyRequestsError
		var migrated *bot.MigrateError
		switch {
		case errors.As(err, &tooMany):
			throttled++
			if throttled > maxThrottled {
				return err
			}
			wait := time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
			c.log.Warn("rate limited by Telegram", "chat_id", chatID, "retry_after", wait)
			if err := sleep(ctx, wait); err != nil {
				return err
			}
		case errors.As(err, &migrated):
			return &MigratedError{ChatID: chatID, NewChatID: int64(migrated.MigrateToChatID)}
		case html && errors.Is(err, bot.ErrorBadRequest):
			// Usually "can't parse entities"; also e.g. an HTML chunk whose visible text is
			// empty. The Markdown source as plain text is the safe second try.
			c.log.Warn("HTML rejected, sending as plain text", "chat_id", chatID, "err", err)
			html = false
		case permanent(err):
			return err
		default:
			serverErrs++
			if serverErrs >= maxServerAttempts {
				return err
			}
			d := bo.next(500*time.Millisecond, 5*time.Second)
			c.log.Warn("send failed, retrying", "chat_id", chatID, "err", err, "in", d)
			if err := sleep(ctx, d); err != nil {
				return err
			}
		}
	}
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

// Migration reports the old and new chat id, for callers that know the error
// only by this method.
func (e *MigratedError) Migration() (from, to int64) { return e.ChatID, e.NewChatID }
