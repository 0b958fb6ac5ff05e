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
)

// Update is one Telegram update, reduced to what clawpen uses.
type Update struct {
	UpdateID int64
	Message  *Incoming // nil for anything but a new message (edits, reactions …); still acknowledged
}

// Incoming is a new message in a chat. Edited messages are ignored on purpose: the
// agent answers what was asked, and an edit would re-trigger it.
type Incoming struct {
	ChatID            int64
	ChatType          string // private, group, supergroup, channel
	ChatTitle         string // group title, or the other person's name in a private chat
	MessageID         int64
	ThreadID          int // forum topic (message_thread_id), 0 if none
	IsTopicMessage    bool
	SenderID          int64
	SenderName        string // first + last name, else @username
	SenderUsername    string
	SenderIsBot       bool
	Text              string // text, or the caption of a media message
	Date              time.Time
	ReplyToBot        bool  // a reply to one of this bot's messages
	MentionsBot       bool  // an @mention of this bot (or a text_mention of it)
	MigrateToChatID   int64 // service message: this group became that supergroup
	MigrateFromChatID int64 // service message: this supergroup was that group
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
	var netBackoff, handleBackoff backoff
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
					if serr := sleep(ctx, time.Duration(max(apiErr.RetryAfter, 1))*time.Second); serr != nil {
						return serr
					}
					continue
				}
			}
			d := netBackoff.next(200*time.Millisecond, 10*time.Second)
			c.log.Warn("getUpdates failed, retrying", "err", err, "in", d)
			if serr := sleep(ctx, d); serr != nil {
				return serr
			}
			continue
		}
		netBackoff.reset()

		for _, raw := range raws {
			u, ok := c.decodeUpdate(raw)
			if !ok || u.UpdateID < offset {
				continue // undecodable without an id, or already confirmed
			}
			if err := handle(ctx, u); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				d := handleBackoff.next(500*time.Millisecond, 30*time.Second)
				c.log.Error("update handler failed, will retry", "update_id", u.UpdateID, "err", err, "in", d)
				if serr := sleep(ctx, d); serr != nil {
					return serr
				}
				break // refetch from the same offset: nothing after this update is skipped
			}
			handleBackoff.reset()
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
	var b backoff
	for {
		err := save(ctx, next)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.next(200*time.Millisecond, 10*time.Second)
		c.log.Error("saving update offset failed, retrying", "offset", next, "err", err, "in", d)
		if serr := sleep(ctx, d); serr != nil {
			return serr
		}
	}
}

func (c *Client) dropWebhook(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := c.call(rctx, "deleteWebhook", map[string]any{}, nil); err != nil && ctx.Err() == nil {
		c.log.Warn("deleteWebhook failed", "err", err)
	}
}

// getUpdates is called directly: the library's own poller advances the offset before
// the update is handled, which would lose updates on a crash.
func (c *Client) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, c.pollTimeout+requestTimeout)
	defer cancel()
	var raws []json.RawMessage
	err := c.call(rctx, "getUpdates", map[string]any{
		"offset":          offset,
		"timeout":         int(c.pollTimeout / time.Second),
		"allowed_updates": []string{"message"},
	}, &raws)
	return raws, err
}

// maxResponse bounds what we read from the API (100 updates with long texts fit easily).
const maxResponse = 32 << 20

// call makes one Bot API request with a JSON body and decodes result into dest.
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

type wireUser struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type wireChat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title"`
	Username  string `json:"username"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
}

type wireEntity struct {
	Type   string    `json:"type"`
	Offset int       `json:"offset"`
	Length int       `json:"length"`
	User   *wireUser `json:"user"`
}

type wireMessage struct {
	MessageID         int64           `json:"message_id"`
	ThreadID          int             `json:"message_thread_id"`
	IsTopicMessage    bool            `json:"is_topic_message"`
	From              *wireUser       `json:"from"`
	SenderChat        *wireChat       `json:"sender_chat"`
	Chat              wireChat        `json:"chat"`
	Date              int64           `json:"date"`
	Text              string          `json:"text"`
	Caption           string          `json:"caption"`
	Entities          []wireEntity    `json:"entities"`
	CaptionEntities   []wireEntity    `json:"caption_entities"`
	ReplyTo           *wireMessage    `json:"reply_to_message"`
	ForumTopicCreated json.RawMessage `json:"forum_topic_created"`
	MigrateTo         int64           `json:"migrate_to_chat_id"`
	MigrateFrom       int64           `json:"migrate_from_chat_id"`
}

type wireUpdate struct {
	UpdateID int64        `json:"update_id"`
	Message  *wireMessage `json:"message"`
}

// decodeUpdate turns raw update JSON into an Update. An update whose message cannot
// be decoded is still returned (with a nil Message) so it gets acknowledged; ok is
// false only when not even its id can be read.
func (c *Client) decodeUpdate(raw json.RawMessage) (Update, bool) {
	var w wireUpdate
	if err := json.Unmarshal(raw, &w); err != nil {
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
	u := Update{UpdateID: w.UpdateID}
	if w.Message != nil {
		u.Message = c.incoming(w.Message)
	}
	return u, true
}

func (c *Client) incoming(m *wireMessage) *Incoming {
	in := &Incoming{
		ChatID:            m.Chat.ID,
		ChatType:          m.Chat.Type,
		ChatTitle:         chatTitle(m.Chat),
		MessageID:         m.MessageID,
		ThreadID:          m.ThreadID,
		IsTopicMessage:    m.IsTopicMessage,
		Text:              m.Text,
		Date:              time.Unix(m.Date, 0).UTC(),
		MigrateToChatID:   m.MigrateTo,
		MigrateFromChatID: m.MigrateFrom,
	}
	entities := m.Entities
	if in.Text == "" {
		in.Text, entities = m.Caption, m.CaptionEntities
	}
	switch {
	case m.From != nil:
		in.SenderID = m.From.ID
		in.SenderUsername = m.From.Username
		in.SenderIsBot = m.From.IsBot
		in.SenderName = strings.TrimSpace(m.From.FirstName + " " + m.From.LastName)
		if in.SenderName == "" && m.From.Username != "" {
			in.SenderName = "@" + m.From.Username
		}
	case m.SenderChat != nil:
		in.SenderID = m.SenderChat.ID
		in.SenderName = chatTitle(*m.SenderChat)
		in.SenderUsername = m.SenderChat.Username
	}
	// In forum topics Telegram sets reply_to_message to the topic's creation message on
	// every message that is not a real reply; that is not a reply to the bot.
	if r := m.ReplyTo; r != nil && r.ForumTopicCreated == nil && r.From != nil && c.botID != 0 && r.From.ID == c.botID {
		in.ReplyToBot = true
	}
	in.MentionsBot = c.mentionsBot(in.Text, entities)
	return in
}

func chatTitle(ch wireChat) string {
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
func (c *Client) mentionsBot(text string, entities []wireEntity) bool {
	if len(entities) == 0 {
		return false
	}
	units := utf16.Encode([]rune(text))
	for _, e := range entities {
		switch e.Type {
		case "mention":
			if c.username == "" || e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(units) {
				continue
			}
			name := string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
			if strings.EqualFold(name, "@"+c.username) {
				return true
			}
		case "text_mention":
			if e.User != nil && c.botID != 0 && e.User.ID == c.botID {
				return true
			}
		}
	}
	return false
}

// backoff doubles a delay between failures.
type backoff struct{ cur time.Duration }

func (b *backoff) next(start, limit time.Duration) time.Duration {
	if b.cur == 0 {
		b.cur = start
	} else {
		b.cur = min(b.cur*2, limit)
	}
	return b.cur
}

func (b *backoff) reset() { b.cur = 0 }
