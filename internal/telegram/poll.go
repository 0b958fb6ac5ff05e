package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/retry"
)

// Update is one Telegram update, reduced to what clawpen uses: a new
// message, as the router takes it, or a press of one of the bot's inline
// buttons. Edited messages are ignored on purpose: the agent answers what
// was asked, and an edit would re-trigger it.
type Update struct {
	UpdateID int64
	Message  *domain.Inbound // nil for anything but a new message (edits, reactions …); still acknowledged
	Press    *domain.Press   // a callback query
}

// APIError is an error answer of the Bot API to a call this package makes directly.
type APIError struct {
	Method      string
	Code        int
	Description string
	RetryAfter  int
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram %s: %d %s", e.Method, e.Code, e.Description)
}

// Poll long-polls getUpdates from offset until ctx is done. Updates are handled one at
// a time, in order; saveOffset(update_id+1) is called only after handle returned nil,
// so a crash never loses an update (it may deliver one twice: handle must tolerate
// that, e.g. by ignoring a message id it already stored). When handle fails, the rest
// of the batch is dropped and the same update is retried after a backoff. Network
// errors and 5xx answers are retried forever; only an invalid token (401/404) ends
// Poll early. Poll returns ctx.Err() when ctx is done.
func (c *Client) Poll(ctx context.Context, offset int64,
	handle func(ctx context.Context, u Update) error,
	saveOffset func(ctx context.Context, next int64) error,
) error {
	c.dropWebhook(ctx)
	netBackoff := retry.Backoff{First: 200 * time.Millisecond, Max: 10 * time.Second}
	handleBackoff := retry.Backoff{First: 500 * time.Millisecond, Max: 30 * time.Second}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		raws, err := c.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var apiErr *APIError
			if errors.As(err, &apiErr) {
				switch apiErr.Code {
				case http.StatusUnauthorized, http.StatusNotFound:
					return fmt.Errorf("telegram: polling stopped: %w", err)
				case http.StatusConflict:
					c.dropWebhook(ctx) // a webhook blocks getUpdates
				case http.StatusTooManyRequests:
					if serr := retry.Sleep(ctx, time.Duration(max(apiErr.RetryAfter, 1))*time.Second); serr != nil {
						return serr
					}
					continue
				}
			}
			d := netBackoff.Next()
			c.log.Warn("getUpdates failed, retrying", "err", err, "in", d)
			if serr := retry.Sleep(ctx, d); serr != nil {
				return serr
			}
			continue
		}
		netBackoff.Reset()
		c.lastPoll.Store(time.Now().UnixNano())

		for _, raw := range raws {
			u, ok := c.decodeUpdate(raw)
			if !ok || u.UpdateID < offset {
				continue // undecodable without an id, or already confirmed
			}
			if err := handle(ctx, u); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				d := handleBackoff.Next()
				c.log.Error("update handler failed, will retry", "update_id", u.UpdateID, "err", err, "in", d)
				if serr := retry.Sleep(ctx, d); serr != nil {
					return serr
				}
				break // refetch from the same offset: nothing after this update is skipped
			}
			handleBackoff.Reset()
			if err := c.saveOffset(ctx, saveOffset, u.UpdateID+1); err != nil {
				return err
			}
			offset = u.UpdateID + 1
		}
	}
}

// saveOffset retries persisting the offset until it works: the update was handled, so
// handling it again (after a refetch) is what we want to avoid.
func (c *Client) saveOffset(ctx context.Context, save func(context.Context, int64) error, next int64) error {
	return retry.Until(ctx, retry.Backoff{First: 200 * time.Millisecond, Max: 10 * time.Second},
		func() error { return save(ctx, next) },
		func(err error, d time.Duration) {
			c.log.Error("saving update offset failed, retrying", "offset", next, "err", err, "in", d)
		})
}

// dropWebhook removes a webhook, which would block getUpdates.
func (c *Client) dropWebhook(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := c.b.DeleteWebhook(rctx, &bot.DeleteWebhookParams{}); err != nil && ctx.Err() == nil {
		c.log.Warn("deleteWebhook failed", "err", c.redact(err))
	}
}

// getUpdates is called directly: the library's own poller advances the offset before
// the update is handled, which would lose updates on a crash. Its updates are kept
// raw, to be decoded one by one (decodeUpdate).
func (c *Client) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, c.pollTimeout+requestTimeout)
	defer cancel()
	var raws []json.RawMessage
	err := c.call(rctx, "getUpdates", map[string]any{
		"offset":          offset,
		"timeout":         int(c.pollTimeout / time.Second),
		"allowed_updates": []string{models.AllowedUpdateMessage, models.AllowedUpdateCallbackQuery},
	}, &raws)
	return raws, err
}

// maxResponse bounds what we read from the API (100 updates with long texts fit easily).
const maxResponse = 32 << 20

// call makes one Bot API request with a JSON body and decodes result into dest. Only
// getUpdates needs it; every other method goes through the library.
func (c *Client) call(ctx context.Context, method string, params any, dest any) error {
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram %s: encode: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.apiURL+"/bot"+c.token+"/"+method, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.redact(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("telegram %s: %w", method, c.redact(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("telegram %s: read answer: %w", method, c.redact(err))
	}
	var r struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return &APIError{Method: method, Code: resp.StatusCode, Description: "undecodable answer: " + http.StatusText(resp.StatusCode)}
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return &APIError{Method: method, Code: code, Description: r.Description, RetryAfter: r.Parameters.RetryAfter}
	}
	if dest != nil {
		if err := json.Unmarshal(r.Result, dest); err != nil {
			return fmt.Errorf("telegram %s: decode result: %w", method, err)
		}
	}
	return nil
}

// ---- update decoding ----

// media names, for the chat, what a message holds besides text.
func media(m *models.Message) string {
	switch {
	case len(m.Photo) > 0:
		return "photo"
	case m.Sticker != nil:
		return "sticker"
	case m.Animation != nil: // before document: Telegram sends a GIF as both
		return "GIF"
	case m.Video != nil:
		return "video"
	case m.VideoNote != nil:
		return "video message"
	case m.Voice != nil:
		return "voice message"
	case m.Audio != nil:
		return "audio file"
	case m.Document != nil:
		return "file"
	case m.Location != nil:
		return "location"
	case m.Contact != nil:
		return "contact"
	case m.Poll != nil:
		return "poll"
	}
	return ""
}

// decodeUpdate turns one update of a getUpdates answer into an Update. Each is
// decoded on its own, so one the library cannot read does not hold up the batch:
// it is still returned (with a nil Message) so it gets acknowledged, and ok is
// false only when not even its id can be read. Such a message (one using a
// variant newer than the library's models, say) is logged by update id and lost;
// a newer go-telegram/bot reads it.
func (c *Client) decodeUpdate(raw json.RawMessage) (Update, bool) {
	var mu models.Update
	if err := json.Unmarshal(raw, &mu); err != nil {
		var id struct {
			UpdateID *int64 `json:"update_id"`
		}
		if json.Unmarshal(raw, &id) != nil || id.UpdateID == nil {
			c.log.Warn("skipping undecodable update", "bytes", len(raw))
			return Update{}, false
		}
		c.log.Warn("undecodable message, acknowledging without handling", "update_id", *id.UpdateID, "err", err)
		return Update{UpdateID: *id.UpdateID}, true
	}
	u := Update{UpdateID: mu.ID}
	switch {
	case mu.Message != nil:
		u.Message = c.incoming(mu.Message)
	case mu.CallbackQuery != nil:
		u.Press = press(mu.CallbackQuery)
	}
	return u, true
}

func (c *Client) incoming(m *models.Message) *domain.Inbound {
	in := &domain.Inbound{
		ChatID:            m.Chat.ID,
		ChatType:          string(m.Chat.Type),
		ChatTitle:         chatTitle(m.Chat),
		MessageID:         int64(m.ID),
		Text:              m.Text,
		Time:              time.Unix(int64(m.Date), 0).UTC(),
		MigrateToChatID:   m.MigrateToChatID,
		MigrateFromChatID: m.MigrateFromChatID,
	}
	// The forum topic to answer in. Outside forums Telegram also sets a
	// thread id on replies, and sending to it fails, so only topics count.
	if m.IsTopicMessage {
		in.ThreadID = m.MessageThreadID
	}
	entities := m.Entities
	if in.Text == "" {
		in.Text, entities = m.Caption, m.CaptionEntities
	}
	in.File = inFile(m)
	if in.Text == "" {
		in.Media = media(m)
	}
	switch {
	case m.From != nil:
		in.SenderID = m.From.ID
		in.SenderIsBot = m.From.IsBot
		in.SenderName = strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
		if in.SenderName == "" && m.From.Username != "" {
			in.SenderName = "@" + m.From.Username
		}
	case m.SenderChat != nil:
		in.SenderID = m.SenderChat.ID
		in.SenderName = chatTitle(*m.SenderChat)
	}
	// In forum topics Telegram sets reply_to_message to the topic's creation message on
	// every message that is not a real reply; that is not a reply to the bot.
	if r := m.ReplyToMessage; r != nil && r.ForumTopicCreated == nil && r.From != nil && c.botID != 0 && r.From.ID == c.botID {
		in.ReplyToBot = true
	}
	in.MentionsBot = c.mentionsBot(in.Text, entities)
	return in
}

func chatTitle(ch models.Chat) string {
	if ch.Title != "" {
		return ch.Title
	}
	if name := strings.TrimSpace(ch.FirstName + " " + ch.LastName); name != "" {
		return name
	}
	if ch.Username != "" {
		return "@" + ch.Username
	}
	return ""
}

// mentionsBot checks the entities, whose offsets count UTF-16 code units.
func (c *Client) mentionsBot(text string, entities []models.MessageEntity) bool {
	if len(entities) == 0 {
		return false
	}
	units := utf16.Encode([]rune(text))
	for _, e := range entities {
		switch e.Type {
		case models.MessageEntityTypeMention:
			if c.username == "" || e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
				continue
			}
			name := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
			if strings.EqualFold(name, "@"+c.username) {
				return true
			}
		case models.MessageEntityTypeTextMention:
			if e.User != nil && c.botID != 0 && e.User.ID == c.botID {
				return true
			}
		}
	}
	return false
}
