package faketg

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Draft is one accepted sendMessageDraft call: a private chat's view of an
// answer being written.
type Draft struct {
	ChatID    int64     `json:"chat_id"`
	ThreadID  int       `json:"message_thread_id,omitempty"`
	DraftID   int64     `json:"draft_id"`
	Text      string    `json:"text"`    // exactly as sent
	Visible   string    `json:"visible"` // tags removed, entities decoded
	ParseMode string    `json:"parse_mode,omitempty"`
	Time      time.Time `json:"time"`
}

// draftState is what the server keeps of drafts.
type draftState struct {
	accepted []Draft
	failCode int // every call fails with it while set
}

// sendMessageDraft checks a call as Telegram does (a private chat, a
// non-zero integer draft_id, 1-4096 characters of parsable text) and
// records it.
func (s *Server) sendMessageDraft(w http.ResponseWriter, p params) {
	s.mu.Lock()
	code := s.drafts.failCode
	s.mu.Unlock()
	if code != 0 {
		retry := 0
		if code == http.StatusTooManyRequests {
			retry = 1
		}
		writeError(w, code, describe(code, retry), retry)
		return
	}
	chatID, err := p.int64("chat_id")
	if err != nil || chatID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: chat not found", 0)
		return
	}
	thread, err := p.int64("message_thread_id")
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: wrong parameter message_thread_id", 0)
		return
	}
	draftID, err := strconv.ParseInt(strings.TrimSpace(p["draft_id"]), 10, 64)
	if err != nil || draftID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: invalid draft_id", 0)
		return
	}
	s.mu.Lock()
	private := s.chatTypeLocked(chatID) == "private"
	s.mu.Unlock()
	if !private {
		writeError(w, http.StatusBadRequest, "Bad Request: message drafts can be sent only to private chats", 0)
		return
	}
	text, mode := p["text"], p["parse_mode"]
	visible := text
	switch strings.ToLower(mode) {
	case "":
	case "html":
		v, err := parseHTML(text)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Bad Request: can't parse entities: "+err.Error(), 0)
			return
		}
		visible = v
	default:
		writeError(w, http.StatusBadRequest, "Bad Request: unsupported parse_mode", 0)
		return
	}
	if strings.TrimSpace(visible) == "" {
		writeError(w, http.StatusBadRequest, "Bad Request: text must be non-empty", 0)
		return
	}
	if utf16Len(visible) > maxTextLen {
		writeError(w, http.StatusBadRequest, "Bad Request: text is too long", 0)
		return
	}
	s.mu.Lock()
	s.drafts.accepted = append(s.drafts.accepted, Draft{ChatID: chatID, ThreadID: int(thread), DraftID: draftID,
		Text: text, Visible: visible, ParseMode: mode, Time: time.Now()})
	s.notifyLocked()
	s.mu.Unlock()
	writeResult(w, true)
}

// Drafts returns the drafts accepted for chatID, in order.
func (s *Server) Drafts(chatID int64) []Draft {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draftsLocked(chatID)
}

func (s *Server) draftsLocked(chatID int64) []Draft {
	var out []Draft
	for _, d := range s.drafts.accepted {
		if d.ChatID == chatID {
			out = append(out, d)
		}
	}
	return out
}

// WaitDrafts waits until at least n drafts were accepted for chatID and
// returns them all.
func (s *Server) WaitDrafts(ctx context.Context, chatID int64, n int) ([]Draft, error) {
	got, err := waitCount(ctx, s, n, func() []Draft { return s.draftsLocked(chatID) })
	if err != nil {
		return got, fmt.Errorf("faketg: %d of %d drafts to chat %d: %w", len(got), n, chatID, err)
	}
	return got, nil
}

// FailDrafts makes every sendMessageDraft call fail with the HTTP/Bot API
// error code until FailDrafts(0). Calls("sendMessageDraft") still counts them.
func (s *Server) FailDrafts(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drafts.failCode = code
}

// controlDrafts answers GET /control/drafts?chat_id=N: the drafts accepted
// for that chat.
func (s *Server) controlDrafts(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.URL.Query().Get("chat_id"), 10, 64)
	if err != nil {
		controlError(w, http.StatusBadRequest, "bad chat_id")
		return
	}
	controlJSON(w, nonNil(s.Drafts(id)))
}

// controlFailDrafts answers POST /control/drafts/fail {"code":N}: every
// draft fails with N from now on; 0 ends it.
func (s *Server) controlFailDrafts(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Code int `json:"code"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
		controlError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	if req.Code != 0 && (req.Code < 400 || req.Code > 599) {
		controlError(w, http.StatusBadRequest, "code must be 0 or an HTTP error code")
		return
	}
	s.FailDrafts(req.Code)
	controlJSON(w, map[string]any{"ok": true})
}
