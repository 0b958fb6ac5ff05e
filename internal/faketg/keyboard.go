package faketg

// Inline keyboards, as Telegram documents them: a message sent with a
// reply_markup of buttons; a user's press arrives as a callback_query
// update, which the bot answers with answerCallbackQuery; the bot edits its
// message with editMessageText (which drops the keyboard unless it is sent
// again).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Button is one inline keyboard button as the bot sent it.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// CallbackAnswer is one accepted answerCallbackQuery call.
type CallbackAnswer struct {
	QueryID   string    `json:"callback_query_id"`
	Text      string    `json:"text,omitempty"`
	ShowAlert bool      `json:"show_alert,omitempty"`
	Time      time.Time `json:"time"`
}

// Edit is one accepted editMessageText call.
type Edit struct {
	ChatID    int64      `json:"chat_id"`
	MessageID int64      `json:"message_id"`
	Text      string     `json:"text"`
	Visible   string     `json:"visible"`
	Keyboard  [][]Button `json:"keyboard,omitempty"`
	Time      time.Time  `json:"time"`
}

// query is a callback query handed to the bot.
type query struct {
	answered bool
}

// keyboards is what the server keeps of callback queries and edits.
type keyboards struct {
	queries map[string]*query
	answers []CallbackAnswer
	edits   []Edit
}

// maxCallbackData is Telegram's bound on a button's callback_data.
const maxCallbackData = 64

// parseKeyboard reads a reply_markup parameter: an inline keyboard whose
// every button has a text and exactly one kind (callback_data of 1-64
// bytes, or url). Telegram also takes reply keyboards and the like; the
// bot is never meant to send them, so they are refused. An empty
// copy_text ({"text":""}, which go-telegram/bot always sends) counts as
// not given.
// textAndKeyboard reads a send's or an edit's text and reply_markup, or
// answers the request's error and returns false.
func textAndKeyboard(w http.ResponseWriter, p params) (string, [][]Button, bool) {
	visible, fail := messageText(p)
	if fail != "" {
		writeError(w, http.StatusBadRequest, fail, 0)
		return "", nil, false
	}
	kb, err := parseKeyboard(p["reply_markup"])
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return "", nil, false
	}
	return visible, kb, true
}

func parseKeyboard(raw string) ([][]Button, error) {
	if raw == "" {
		return nil, nil
	}
	var m struct {
		InlineKeyboard [][]struct {
			Button
			CopyText *struct {
				Text string `json:"text"`
			} `json:"copy_text"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.InlineKeyboard == nil {
		return nil, errors.New("can't parse reply keyboard markup JSON object")
	}
	out := make([][]Button, 0, len(m.InlineKeyboard))
	for _, row := range m.InlineKeyboard {
		var r []Button
		for _, b := range row {
			kinds := 0
			if b.CallbackData != "" {
				kinds++
				if len(b.CallbackData) > maxCallbackData {
					return nil, errors.New("BUTTON_DATA_INVALID")
				}
			}
			if b.URL != "" {
				kinds++
			}
			if b.CopyText != nil && b.CopyText.Text != "" {
				kinds++
			}
			switch {
			case b.Text == "":
				return nil, errors.New("can't parse inline keyboard button: text buttons are unallowed in the inline keyboard")
			case kinds != 1:
				return nil, errors.New("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
			}
			r = append(r, b.Button)
		}
		out = append(out, r)
	}
	return out, nil
}

// messageText checks text and parse_mode as sendMessage and
// editMessageText do, and answers the visible text or the error Telegram
// would give.
func messageText(p params) (visible, fail string) {
	text := p["text"]
	if strings.TrimSpace(text) == "" {
		return "", "Bad Request: message text is empty"
	}
	visible = text
	switch strings.ToLower(p["parse_mode"]) {
	case "":
	case "html":
		v, err := parseHTML(text)
		if err != nil {
			return "", "Bad Request: can't parse entities: " + err.Error()
		}
		visible = v
	case "markdown", "markdownv2":
		// Accepted without validation: clawpen sends HTML or plain text only.
	default:
		return "", "Bad Request: unsupported parse_mode"
	}
	if strings.TrimSpace(visible) == "" {
		return "", "Bad Request: message text is empty"
	}
	if utf16Len(visible) > maxTextLen {
		return "", "Bad Request: message is too long"
	}
	return visible, ""
}

// messageJSON is a sent message as the Bot API returns it. Call with s.mu held.
func (s *Server) messageJSONLocked(m SentMessage) map[string]any {
	msg := map[string]any{
		"message_id": m.MessageID,
		"from":       s.bot,
		"chat":       map[string]any{"id": m.ChatID, "type": s.chatTypeLocked(m.ChatID)},
		"date":       m.Time.Unix(),
		"text":       m.Visible,
	}
	if m.ThreadID != 0 {
		msg["message_thread_id"] = m.ThreadID
		msg["is_topic_message"] = true
	}
	if len(m.Keyboard) > 0 {
		msg["reply_markup"] = map[string]any{"inline_keyboard": m.Keyboard}
	}
	if !m.Edited.IsZero() {
		msg["edit_date"] = m.Edited.Unix()
	}
	return msg
}

// editMessageText replaces the text (and keyboard: none unless sent again)
// of a message the bot sent, as Telegram does.
func (s *Server) editMessageText(w http.ResponseWriter, p params) {
	if p["inline_message_id"] != "" {
		writeError(w, http.StatusBadRequest, "Bad Request: inline messages are not supported by the fake", 0)
		return
	}
	chatID, err := p.int64("chat_id")
	if err != nil || chatID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: chat not found", 0)
		return
	}
	msgID, err := p.int64("message_id")
	if err != nil || msgID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: message identifier is not specified", 0)
		return
	}
	visible, kb, ok := textAndKeyboard(w, p)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.sent, func(m SentMessage) bool { return m.ChatID == chatID && m.MessageID == msgID })
	if i < 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: message to edit not found", 0)
		return
	}
	m := &s.sent[i]
	if m.Text == p["text"] && m.ParseMode == p["parse_mode"] && keyboardsEqual(m.Keyboard, kb) {
		writeError(w, http.StatusBadRequest, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", 0)
		return
	}
	m.Text, m.Visible, m.ParseMode, m.Keyboard, m.Edited = p["text"], visible, p["parse_mode"], kb, time.Now()
	s.kb.edits = append(s.kb.edits, Edit{ChatID: chatID, MessageID: msgID, Text: m.Text, Visible: visible, Keyboard: kb, Time: m.Edited})
	s.notifyLocked()
	writeResult(w, s.messageJSONLocked(*m))
}

func keyboardsEqual(a, b [][]Button) bool {
	return slices.EqualFunc(a, b, func(x, y []Button) bool { return slices.Equal(x, y) })
}

// answerCallbackQuery accepts one answer to a query handed to the bot.
// Telegram refuses an unknown id and a second answer alike.
func (s *Server) answerCallbackQuery(w http.ResponseWriter, p params) {
	id := p["callback_query_id"]
	text := p["text"]
	if utf16Len(text) > 200 {
		writeError(w, http.StatusBadRequest, "Bad Request: MESSAGE_TOO_LONG", 0)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.kb.queries[id]
	if q == nil || q.answered {
		writeError(w, http.StatusBadRequest, "Bad Request: query is too old and response timeout expired or query ID is invalid", 0)
		return
	}
	q.answered = true
	s.kb.answers = append(s.kb.answers, CallbackAnswer{QueryID: id, Text: text, ShowAlert: p["show_alert"] == "true", Time: time.Now()})
	s.notifyLocked()
	writeResult(w, true)
}

// Press queues the callback_query update of user from pressing a button
// with data on message messageID of chatID, and returns the query's id.
// data need not be on the message: a modified client can send anything,
// which is what attacks need. A message the bot never sent arrives as
// Telegram sends an inaccessible one (date 0).
func (s *Server) Press(from User, chatID, messageID int64, data string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	s.mu.Lock()
	if s.kb.queries == nil {
		s.kb.queries = map[string]*query{}
	}
	s.kb.queries[id] = &query{}
	msg := map[string]any{"message_id": messageID, "chat": map[string]any{"id": chatID, "type": s.chatTypeLocked(chatID)}, "date": 0}
	if i := slices.IndexFunc(s.sent, func(m SentMessage) bool { return m.ChatID == chatID && m.MessageID == messageID }); i >= 0 {
		msg = s.messageJSONLocked(s.sent[i])
	}
	s.mu.Unlock()
	s.pushUpdate(map[string]any{"callback_query": map[string]any{
		"id": id, "from": from, "message": msg, "chat_instance": strconv.FormatInt(chatID*7919, 10), "data": data,
	}})
	return id
}

// PressButton presses the button labelled text on a message the bot sent,
// as a Telegram client lets a user do: an error when the message has no
// such button (any more).
func (s *Server) PressButton(from User, chatID, messageID int64, text string) (string, error) {
	s.mu.Lock()
	data := ""
	for _, m := range s.sent {
		if m.ChatID != chatID || m.MessageID != messageID {
			continue
		}
		for _, row := range m.Keyboard {
			for _, b := range row {
				if b.Text == text && b.CallbackData != "" {
					data = b.CallbackData
				}
			}
		}
	}
	s.mu.Unlock()
	if data == "" {
		return "", fmt.Errorf("faketg: message %d of chat %d has no button %q", messageID, chatID, text)
	}
	return s.Press(from, chatID, messageID, data), nil
}

// Message returns the message the bot sent as messageID of chatID, as it
// is now (edits applied).
func (s *Server) Message(chatID, messageID int64) (SentMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.sent, func(m SentMessage) bool { return m.ChatID == chatID && m.MessageID == messageID })
	if i < 0 {
		return SentMessage{}, false
	}
	return s.sent[i], true
}

// Edits returns every accepted editMessageText call, in order.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kb.edits)
}

// CallbackAnswers returns every accepted answerCallbackQuery call, in order.
func (s *Server) CallbackAnswers() []CallbackAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kb.answers)
}

// WaitAnswer waits until the bot answered the callback query id.
func (s *Server) WaitAnswer(ctx context.Context, id string) (CallbackAnswer, error) {
	got, err := waitCount(ctx, s, 1, func() []CallbackAnswer {
		var out []CallbackAnswer
		for _, a := range s.kb.answers {
			if a.QueryID == id {
				out = append(out, a)
			}
		}
		return out
	})
	if err != nil {
		return CallbackAnswer{}, fmt.Errorf("faketg: no answer to callback query %s: %w", id, err)
	}
	return got[0], nil
}

// WaitMessage waits until the message messageID of chatID, as it is now,
// satisfies ok, and returns it.
func (s *Server) WaitMessage(ctx context.Context, chatID, messageID int64, ok func(SentMessage) bool) (SentMessage, error) {
	got, err := waitCount(ctx, s, 1, func() []SentMessage {
		i := slices.IndexFunc(s.sent, func(m SentMessage) bool { return m.ChatID == chatID && m.MessageID == messageID })
		if i >= 0 && ok(s.sent[i]) {
			return s.sent[i : i+1]
		}
		return nil
	})
	if err != nil {
		m, _ := s.Message(chatID, messageID)
		return m, fmt.Errorf("faketg: message %d of chat %d (now %q): %w", messageID, chatID, m.Visible, err)
	}
	return got[0], nil
}

// controlPress answers POST /control/press {"from":{…},"chat_id":N,
// "message_id":N, "data":"…"} or with "button":"<label>" instead of data:
// a user pressing a button; it answers the query's id.
func (s *Server) controlPress(w http.ResponseWriter, r *http.Request) {
	var req struct {
		From      User   `json:"from"`
		ChatID    int64  `json:"chat_id"`
		MessageID int64  `json:"message_id"`
		Data      string `json:"data"`
		Button    string `json:"button"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	if req.From.ID == 0 || req.ChatID == 0 || req.MessageID == 0 {
		controlError(w, http.StatusBadRequest, "from.id, chat_id and message_id are required")
		return
	}
	id := ""
	if req.Button != "" {
		var err error
		if id, err = s.PressButton(req.From, req.ChatID, req.MessageID, req.Button); err != nil {
			controlError(w, http.StatusBadRequest, err.Error())
			return
		}
	} else {
		id = s.Press(req.From, req.ChatID, req.MessageID, req.Data)
	}
	controlJSON(w, map[string]any{"ok": true, "callback_query_id": id})
}

// controlAnswers answers GET /control/answers: every answerCallbackQuery
// accepted.
func (s *Server) controlAnswers(w http.ResponseWriter, _ *http.Request) {
	controlJSON(w, nonNil(s.CallbackAnswers()))
}

// WaitMatching waits until at least n messages sent to chatID, as they are
// now, satisfy ok, and returns those.
func (s *Server) WaitMatching(ctx context.Context, chatID int64, n int, ok func(SentMessage) bool) ([]SentMessage, error) {
	got, err := waitCount(ctx, s, n, func() []SentMessage {
		var out []SentMessage
		for _, m := range s.sentToLocked(chatID) {
			if ok(m) {
				out = append(out, m)
			}
		}
		return out
	})
	if err != nil {
		return got, fmt.Errorf("faketg: %d of %d matching messages to chat %d: %w", len(got), n, chatID, err)
	}
	return got, nil
}
