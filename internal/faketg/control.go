package faketg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// msgOpts collects the MsgOpt settings of a pushed message.
type msgOpts struct {
	replyToBot  bool
	replyTo     int64
	threadID    int
	topicBy     *User
	entities    []Entity
	setEntities bool
	migrateTo   int64
	migrateFrom int64
	caption     bool // a photo, the text its caption
	sticker     bool
	date        time.Time
	messageID   int64
	extra       map[string]any // Attach: the file's field of the message (instead of the default photo)
}

// MsgOpt adjusts a message pushed with PushMessage.
type MsgOpt func(*msgOpts)

// ReplyToBot makes the message a reply to one of the bot's messages (the last one
// sent to that chat, or a made-up one).
func ReplyToBot() MsgOpt { return func(o *msgOpts) { o.replyToBot = true } }

// ReplyTo makes the message a reply to an earlier message of the same chat, sent by a user.
func ReplyTo(messageID int64) MsgOpt { return func(o *msgOpts) { o.replyTo = messageID } }

// InThread puts the message in a forum topic: message_thread_id, is_topic_message,
// and — as Telegram does — a reply_to_message pointing at the topic's creation.
func InThread(threadID int) MsgOpt { return func(o *msgOpts) { o.threadID = threadID } }

// TopicCreatedBy names who created the forum topic of InThread (default: the sender).
// Telegram's pseudo reply to the topic's creation message then comes from that user.
func TopicCreatedBy(u User) MsgOpt { return func(o *msgOpts) { o.topicBy = &u } }

// WithEntities sets the message entities explicitly. Without it, mention entities
// are derived from the text like Telegram does (@name, 5–32 characters).
func WithEntities(e ...Entity) MsgOpt {
	return func(o *msgOpts) { o.entities, o.setEntities = e, true }
}

// MigrateTo marks the message as the service message of a group upgraded to the
// supergroup newChatID.
func MigrateTo(newChatID int64) MsgOpt { return func(o *msgOpts) { o.migrateTo = newChatID } }

// MigrateFrom marks the message as the first service message of a supergroup that was
// the group oldChatID.
func MigrateFrom(oldChatID int64) MsgOpt { return func(o *msgOpts) { o.migrateFrom = oldChatID } }

// AsCaption sends the text as the caption of a photo instead of as message
// text; with no text, the photo has no caption.
func AsCaption() MsgOpt { return func(o *msgOpts) { o.caption = true } }

// Sticker sends a sticker, as Telegram does: no text, no caption.
func Sticker() MsgOpt { return func(o *msgOpts) { o.sticker = true } }

// WithMessageID sets the message id instead of the next one of the chat.
func WithMessageID(id int64) MsgOpt { return func(o *msgOpts) { o.messageID = id } }

var mentionRE = regexp.MustCompile(`(^|[^A-Za-z0-9_])(@[A-Za-z0-9_]{5,32})\b`)

// PushMessage queues an update carrying a message from `from` in chat chatID and
// returns its update_id. chatType is private, group, supergroup or channel.
func (s *Server) PushMessage(chatID int64, chatType, title string, from User, text string, opts ...MsgOpt) int64 {
	var o msgOpts
	for _, f := range opts {
		f(&o)
	}
	if o.date.IsZero() {
		o.date = time.Now()
	}
	chat := map[string]any{"id": chatID, "type": chatType}
	if chatType == "private" {
		chat["first_name"] = from.FirstName
		if from.LastName != "" {
			chat["last_name"] = from.LastName
		}
		if from.Username != "" {
			chat["username"] = from.Username
		}
	} else {
		chat["title"] = title
		if o.threadID != 0 {
			chat["is_forum"] = true
		}
	}

	s.mu.Lock()
	s.chatTypes[chatID] = chatType
	msgID := o.messageID
	if msgID == 0 {
		s.msgIDs[chatID]++
		msgID = s.msgIDs[chatID]
	}
	var lastBotMsg int64
	for i := len(s.sent) - 1; i >= 0; i-- {
		if s.sent[i].ChatID == chatID {
			lastBotMsg = s.sent[i].MessageID
			break
		}
	}
	bot := s.bot
	s.mu.Unlock()

	msg := map[string]any{
		"message_id": msgID,
		"from":       from,
		"chat":       chat,
		"date":       o.date.Unix(),
	}
	entities := o.entities
	if !o.setEntities {
		entities = mentions(text)
	}
	maps.Copy(msg, o.extra)
	if o.caption && o.extra == nil {
		msg["photo"] = []map[string]any{{"file_id": "photo1", "file_unique_id": "p1", "width": 90, "height": 90, "file_size": 1200}}
	}
	if o.sticker {
		msg["sticker"] = map[string]any{"file_id": "sticker1", "file_unique_id": "s1", "type": "regular",
			"width": 512, "height": 512, "is_animated": false, "is_video": false, "emoji": "👍"}
	}
	if text != "" {
		if o.caption {
			msg["caption"] = text
			if len(entities) > 0 {
				msg["caption_entities"] = entities
			}
		} else {
			msg["text"] = text
			if len(entities) > 0 {
				msg["entities"] = entities
			}
		}
	}
	if o.threadID != 0 {
		msg["message_thread_id"] = o.threadID
		msg["is_topic_message"] = true
		creator := from
		if o.topicBy != nil {
			creator = *o.topicBy
		}
		msg["reply_to_message"] = map[string]any{
			"message_id": o.threadID, "from": creator, "chat": chat, "date": o.date.Unix(),
			"message_thread_id":   o.threadID,
			"forum_topic_created": map[string]any{"name": "Topic", "icon_color": 7322096},
		}
	}
	switch {
	case o.replyToBot:
		if lastBotMsg == 0 {
			lastBotMsg = max(msgID-1, 1)
		}
		reply := map[string]any{"message_id": lastBotMsg, "from": bot, "chat": chat, "date": o.date.Unix(), "text": "earlier answer"}
		if o.threadID != 0 {
			reply["message_thread_id"] = o.threadID
		}
		msg["reply_to_message"] = reply
	case o.replyTo != 0:
		msg["reply_to_message"] = map[string]any{"message_id": o.replyTo, "from": from, "chat": chat, "date": o.date.Unix(), "text": "earlier message"}
	}
	if o.migrateTo != 0 {
		msg["migrate_to_chat_id"] = o.migrateTo
	}
	if o.migrateFrom != 0 {
		msg["migrate_from_chat_id"] = o.migrateFrom
	}
	return s.pushUpdate(map[string]any{"message": msg})
}

// mentions finds @usernames the way Telegram marks them, with UTF-16 offsets.
func mentions(text string) []Entity {
	var out []Entity
	for _, m := range mentionRE.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[4], m[5]
		out = append(out, Entity{Type: "mention", Offset: utf16Len(text[:start]), Length: utf16Len(text[start:end])})
	}
	return out
}

// MentionOf builds a text_mention entity for user over text[from:to] (byte offsets).
func MentionOf(text string, from, to int, user User) Entity {
	return Entity{Type: "text_mention", Offset: utf16Len(text[:from]), Length: utf16Len(text[from:to]), User: &user}
}

// PushUpdate queues a raw update. A missing update_id is assigned; the id is returned.
func (s *Server) PushUpdate(raw json.RawMessage) (int64, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, fmt.Errorf("faketg: update is not a JSON object: %w", err)
	}
	return s.pushUpdate(m), nil
}

func (s *Server) pushUpdate(m map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextUpdateID
	if v, ok := m["update_id"].(float64); ok && int64(v) >= id {
		id = int64(v)
	}
	s.nextUpdateID = id + 1
	m["update_id"] = id
	raw, _ := json.Marshal(m) // maps of JSON values always marshal
	s.updates = append(s.updates, update{id: id, raw: raw})
	s.notifyLocked()
	return id
}

// Sent returns every message accepted by sendMessage, in order.
func (s *Server) Sent() []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SentMessage(nil), s.sent...)
}

// SentTo returns the messages sent to chatID, in order.
func (s *Server) SentTo(chatID int64) []SentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentToLocked(chatID)
}

func (s *Server) sentToLocked(chatID int64) []SentMessage {
	var out []SentMessage
	for _, m := range s.sent {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// WaitSent waits until at least n messages were sent to chatID and returns them all.
func (s *Server) WaitSent(ctx context.Context, chatID int64, n int) ([]SentMessage, error) {
	got, err := waitCount(ctx, s, n, func() []SentMessage { return s.sentToLocked(chatID) })
	if err != nil {
		return got, fmt.Errorf("faketg: %d of %d messages to chat %d: %w", len(got), n, chatID, err)
	}
	return got, nil
}

// waitCount waits until list, called with s.mu held, has at least n items
// and returns them.
func waitCount[T any](ctx context.Context, s *Server, n int, list func() []T) ([]T, error) {
	for {
		s.mu.Lock()
		got := list()
		changed := s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return got, ctx.Err()
		case <-s.closed:
			return got, errors.New("server closed")
		}
	}
}

// WaitConfirmed waits until getUpdates confirmed every update below offset.
func (s *Server) WaitConfirmed(ctx context.Context, offset int64) error {
	for {
		s.mu.Lock()
		ok := s.confirmed >= offset
		changed := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faketg: offset %d not confirmed: %w", offset, ctx.Err())
		case <-s.closed:
			return fmt.Errorf("faketg: server closed")
		}
	}
}

// ChatActions returns the chat actions (typing …) sent to chatID.
func (s *Server) ChatActions(chatID int64) []ChatAction {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ChatAction
	for _, a := range s.actions {
		if a.ChatID == chatID {
			out = append(out, a)
		}
	}
	return out
}

// Commands returns the commands last set by setMyCommands without a scope
// (the default scope, which every chat sees).
func (s *Server) Commands() []Command { return s.CommandsFor("default") }

// CommandsFor returns the command menu of one scope: "default",
// "chat:<chat id>", "all_private_chats", …; nil when none is set.
func (s *Server) CommandsFor(scope string) []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command(nil), s.commands[scope]...)
}

// CommandScopes returns every scope that has a command menu.
func (s *Server) CommandScopes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.commands {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Tokens returns the distinct bot tokens seen, in order of first use.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.tokens...)
}

// Calls returns how often a Bot API method was called (case-insensitive name).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[strings.ToLower(method)]
}

// Confirmed is the highest offset any getUpdates call has confirmed: every update
// with a smaller id has been acknowledged by the client.
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Pending returns how many updates are queued and not yet confirmed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

// FailNextSends makes the next n sendMessage calls fail with the given HTTP/Bot API
// error code (429 carries retry_after seconds in parameters).
func (s *Server) FailNextSends(n, code, retryAfter int) {
	s.FailSendsAfter(0, n, code, retryAfter)
}

// FailSendsAfter lets the next ok sendMessage calls through, then fails n the
// way FailNextSends does: a failure between the parts of a split answer.
func (s *Server) FailSendsAfter(ok, n, code, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAfter, s.failN, s.failCode, s.failRetry = ok, n, code, retryAfter
}

// MigrateChat makes the group oldChatID behave as upgraded to the supergroup
// newChatID: sendMessage to the old id answers 400 with parameters.migrate_to_chat_id.
func (s *Server) MigrateChat(oldChatID, newChatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.migrated[oldChatID] = newChatID
}

// DropNextConnections makes the server close the connection of the next n Bot API
// requests without answering.
func (s *Server) DropNextConnections(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropN = n
}

// ---- HTTP control API ----

type controlMessageReq struct {
	ChatID     int64  `json:"chat_id"`
	ChatType   string `json:"chat_type"`
	Title      string `json:"title"`
	From       User   `json:"from"`
	Text       string `json:"text"`
	ReplyToBot bool   `json:"reply_to_bot"`
	ThreadID   int    `json:"thread_id"`
	MigrateTo  int64  `json:"migrate_to_chat_id"`
}

func (s *Server) controlMessage(w http.ResponseWriter, r *http.Request) {
	var req controlMessageReq
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	if req.ChatID == 0 || req.From.ID == 0 {
		controlError(w, http.StatusBadRequest, "chat_id and from.id are required")
		return
	}
	if req.ChatType == "" {
		req.ChatType = "private"
		if req.ChatID < 0 {
			req.ChatType = "supergroup"
		}
	}
	var opts []MsgOpt
	if req.ReplyToBot {
		opts = append(opts, ReplyToBot())
	}
	if req.ThreadID != 0 {
		opts = append(opts, InThread(req.ThreadID))
	}
	if req.MigrateTo != 0 {
		opts = append(opts, MigrateTo(req.MigrateTo))
	}
	id := s.PushMessage(req.ChatID, req.ChatType, req.Title, req.From, req.Text, opts...)
	controlJSON(w, map[string]any{"ok": true, "update_id": id})
}

func (s *Server) controlUpdate(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&raw); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	id, err := s.PushUpdate(raw)
	if err != nil {
		controlError(w, http.StatusBadRequest, err.Error())
		return
	}
	controlJSON(w, map[string]any{"ok": true, "update_id": id})
}

func (s *Server) controlSent(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query().Get("chat_id"); q != "" {
		id, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			controlError(w, http.StatusBadRequest, "bad chat_id")
			return
		}
		controlJSON(w, nonNil(s.SentTo(id)))
		return
	}
	controlJSON(w, nonNil(s.Sent()))
}

func (s *Server) controlActions(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.URL.Query().Get("chat_id"), 10, 64)
	if err != nil {
		controlError(w, http.StatusBadRequest, "bad chat_id")
		return
	}
	controlJSON(w, nonNil(s.ChatActions(id)))
}

func (s *Server) controlFail(w http.ResponseWriter, r *http.Request) {
	var req struct {
		N          int `json:"n"`
		Code       int `json:"code"`
		RetryAfter int `json:"retry_after"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	if req.Code < 400 || req.Code > 599 {
		controlError(w, http.StatusBadRequest, "code must be an HTTP error code")
		return
	}
	s.FailNextSends(req.N, req.Code, req.RetryAfter)
	controlJSON(w, map[string]any{"ok": true})
}

func (s *Server) controlDrop(w http.ResponseWriter, r *http.Request) {
	var req struct {
		N int `json:"n"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	s.DropNextConnections(req.N)
	controlJSON(w, map[string]any{"ok": true})
}

func (s *Server) controlConfirmed(w http.ResponseWriter, _ *http.Request) {
	controlJSON(w, map[string]any{"confirmed": s.Confirmed(), "pending": s.Pending()})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func controlJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func controlError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": msg})
}
