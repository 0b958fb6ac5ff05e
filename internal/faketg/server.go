// Package faketg is a fake Telegram Bot API server for tests. It speaks the real wire
// protocol (POST /bot<token>/<method> with JSON, url-encoded or multipart bodies;
// {"ok":true,"result":…} / {"ok":false,"error_code":…,"description":…} answers), so
// the real github.com/go-telegram/bot client and clawpen's adapter talk to it exactly
// as they talk to api.telegram.org.
//
// Tests drive it from Go (PushMessage, Sent, WaitSent, FailNextSends …) or, when it
// runs as a standalone process, over HTTP under /control/.
package faketg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default bot identity answered by getMe.
const (
	DefaultBotID       = 1000001
	DefaultBotUsername = "andy_test_bot"
)

// maxTextLen is Telegram's message limit in UTF-16 units, counted after entity parsing.
const maxTextLen = 4096

// User is a Telegram user as it appears in updates.
type User struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name,omitempty"`
	Username  string `json:"username,omitempty"`
}

// Entity is a Telegram MessageEntity (offsets and lengths in UTF-16 units).
type Entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
	URL    string `json:"url,omitempty"`
	User   *User  `json:"user,omitempty"`
}

// SentMessage is one accepted sendMessage call.
type SentMessage struct {
	ChatID    int64      `json:"chat_id"`
	ThreadID  int        `json:"message_thread_id,omitempty"`
	MessageID int64      `json:"message_id"`
	Text      string     `json:"text"`    // exactly as sent (HTML source when ParseMode is HTML)
	Visible   string     `json:"visible"` // what a user would see: tags removed, entities decoded
	ParseMode string     `json:"parse_mode,omitempty"`
	Keyboard  [][]Button `json:"keyboard,omitempty"` // its inline keyboard, as it is now
	Token     string     `json:"-"`
	Time      time.Time  `json:"time"`
	Edited    time.Time  `json:"edited,omitzero"` // the last editMessageText
}

// ChatAction is one accepted sendChatAction call.
type ChatAction struct {
	ChatID   int64     `json:"chat_id"`
	ThreadID int       `json:"message_thread_id,omitempty"`
	Action   string    `json:"action"`
	Time     time.Time `json:"time"` // when it was accepted (the load test times runs by it)
}

// Command is one bot command set by setMyCommands.
type Command struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

type update struct {
	id     int64
	raw    json.RawMessage
	handed bool // already in a getUpdates answer (see WithHandOut)
}

// Server is the fake. All methods are safe for concurrent use.
type Server struct {
	handler http.Handler
	ts      *httptest.Server // when started by New
	hs      *http.Server     // when started by Start
	url     string
	closed  chan struct{}
	once    sync.Once

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every state change
	bot          User
	requireToken string
	tokens       []string
	calls        map[string]int
	updates      []update // not yet confirmed
	nextUpdateID int64
	confirmed    int64
	msgIDs       map[int64]int64
	chatTypes    map[int64]string
	sent         []SentMessage
	actions      []ChatAction
	commands     map[string][]Command // by scope (see CommandsFor)
	drafts       draftState
	kb           keyboards       // keyboard.go
	allowed      []string        // getUpdates' allowed_updates, as last given (nil: all)
	migrated     map[int64]int64 // old group id -> supergroup id
	failN        int
	failAfter    int // sends let through before the failN failures
	failCode     int
	failRetry    int
	dropN        int
	handOut      func(updateID int64, at time.Time)
	// files.go
	files         []SentFile
	stored        map[string][]byte // file id -> bytes users send
	failDownloads int
	held          map[string]chan struct{} // file id: downloads wait until it is closed
	failFiles     int
	downloads     int
}

// Option configures a Server.
type Option func(*Server)

// WithBot sets the identity getMe answers.
func WithBot(id int64, username string) Option {
	return func(s *Server) {
		s.bot.ID = id
		s.bot.Username = username
	}
}

// WithHandOut calls f the first time each update goes out in a getUpdates
// answer, with the time just before the answer is written: benchmarks start
// their clock there, where Telegram would hand the update to the bot.
func WithHandOut(f func(updateID int64, at time.Time)) Option {
	return func(s *Server) { s.handOut = f }
}

// WithToken makes the server answer 401 Unauthorized to any other token.
func WithToken(token string) Option {
	return func(s *Server) { s.requireToken = token }
}

func newServer(opts []Option) *Server {
	s := &Server{
		closed:       make(chan struct{}),
		changed:      make(chan struct{}),
		bot:          User{ID: DefaultBotID, IsBot: true, FirstName: "Andy", Username: DefaultBotUsername},
		calls:        map[string]int{},
		nextUpdateID: 1,
		msgIDs:       map[int64]int64{},
		chatTypes:    map[int64]string{},
		commands:     map[string][]Command{},
		migrated:     map[int64]int64{},
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /control/message", s.controlMessage)
	mux.HandleFunc("POST /control/update", s.controlUpdate)
	mux.HandleFunc("GET /control/sent", s.controlSent)
	mux.HandleFunc("GET /control/actions", s.controlActions)
	mux.HandleFunc("POST /control/fail", s.controlFail)
	mux.HandleFunc("POST /control/drop", s.controlDrop)
	mux.HandleFunc("GET /control/confirmed", s.controlConfirmed)
	mux.HandleFunc("GET /control/drafts", s.controlDrafts)
	mux.HandleFunc("POST /control/drafts/fail", s.controlFailDrafts)
	mux.HandleFunc("POST /control/press", s.controlPress)
	mux.HandleFunc("GET /control/answers", s.controlAnswers)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/bot") {
			s.serveBot(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/file/bot") {
			s.serveFile(w, r)
			return
		}
		writeError(w, http.StatusNotFound, "Not Found", 0)
	})
	s.handler = mux
	return s
}

// New starts a fake server on a random loopback port (httptest).
func New(opts ...Option) *Server {
	s := newServer(opts)
	s.ts = httptest.NewServer(s.handler)
	s.url = s.ts.URL
	return s
}

// Start starts a fake server listening on addr (e.g. "127.0.0.1:8081"), for use as a
// standalone process.
func Start(addr string, opts ...Option) (*Server, error) {
	s := newServer(opts)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faketg: listen %s: %w", addr, err)
	}
	s.hs = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	go func() { _ = s.hs.Serve(ln) }()
	return s, nil
}

// URL is the base URL to use as TELEGRAM_API_URL.
func (s *Server) URL() string { return s.url }

// Close stops the server; pending long polls return at once.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		if s.ts != nil {
			s.ts.Close()
		}
		if s.hs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.hs.Shutdown(ctx)
		}
	})
}

// Bot returns the identity getMe answers.
func (s *Server) Bot() User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bot
}

// notifyLocked wakes everybody waiting for a change. Call with s.mu held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// ---- Bot API ----

func (s *Server) serveBot(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/bot")
	token, method, ok := strings.Cut(rest, "/")
	method = strings.TrimPrefix(method, "test/")
	if !ok || token == "" || method == "" || strings.Contains(method, "/") {
		writeError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	s.mu.Lock()
	if s.dropN > 0 {
		s.dropN--
		s.mu.Unlock()
		dropConnection(w)
		return
	}
	s.recordTokenLocked(token)
	s.calls[strings.ToLower(method)]++
	required := s.requireToken
	s.mu.Unlock()
	if required != "" && token != required {
		writeError(w, http.StatusUnauthorized, "Unauthorized", 0)
		return
	}
	if m := strings.ToLower(method); m == "sendphoto" || m == "senddocument" {
		s.sendFile(w, r, m) // multipart with a file part: read in files.go
		return
	}
	params, err := readParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	switch strings.ToLower(method) {
	case "getme":
		writeResult(w, s.Bot())
	case "getupdates":
		s.getUpdates(w, r, params)
	case "getfile":
		s.getFile(w, params)
	case "sendmessagedraft":
		s.sendMessageDraft(w, params)
	case "editmessagetext":
		s.editMessageText(w, params)
	case "answercallbackquery":
		s.answerCallbackQuery(w, params)
	case "deletewebhook", "setmycommands", "deletemycommands", "sendchataction", "sendmessage", "getwebhookinfo":
		s.dispatch(w, strings.ToLower(method), params, token)
	default:
		writeError(w, http.StatusNotFound, "Not Found", 0)
	}
}

func (s *Server) dispatch(w http.ResponseWriter, method string, p params, token string) {
	switch method {
	case "deletewebhook":
		writeResult(w, true)
	case "getwebhookinfo":
		s.mu.Lock()
		n := len(s.updates)
		s.mu.Unlock()
		writeResult(w, map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": n})
	case "sendmessage":
		s.sendMessage(w, p, token)
	case "sendchataction":
		s.sendChatAction(w, p)
	case "setmycommands":
		s.setMyCommands(w, p)
	case "deletemycommands":
		s.deleteMyCommands(w, p)
	}
}

func (s *Server) recordTokenLocked(token string) {
	for _, t := range s.tokens {
		if t == token {
			return
		}
	}
	s.tokens = append(s.tokens, token)
}

func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// The documented way to make net/http drop the connection without an answer.
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p params) {
	offset, err := p.int64("offset")
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: wrong parameter offset", 0)
		return
	}
	limit, _ := p.int64("limit")
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := p.int64("timeout")
	if raw, ok := p["allowed_updates"]; ok {
		var kinds []string
		if err := json.Unmarshal([]byte(raw), &kinds); err != nil {
			writeError(w, http.StatusBadRequest, "Bad Request: can't parse allowed updates", 0)
			return
		}
		s.mu.Lock()
		s.allowed = kinds
		s.mu.Unlock()
	}
	deadline := time.NewTimer(time.Duration(max(timeout, 0)) * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if offset > 0 {
			// Telegram: calling getUpdates with an offset confirms every update below it.
			kept := s.updates[:0]
			for _, u := range s.updates {
				if u.id >= offset {
					kept = append(kept, u)
				}
			}
			s.updates = kept
			if offset > s.confirmed {
				s.confirmed = offset
				s.notifyLocked()
			}
		}
		s.dropUnwantedLocked()
		var result []json.RawMessage
		var fresh []int64
		for i := range s.updates {
			if int64(len(result)) >= limit {
				break
			}
			result = append(result, s.updates[i].raw)
			if !s.updates[i].handed {
				s.updates[i].handed = true
				fresh = append(fresh, s.updates[i].id)
			}
		}
		changed := s.changed
		handOut := s.handOut
		s.mu.Unlock()
		if handOut != nil {
			at := time.Now()
			for _, id := range fresh {
				handOut(id, at)
			}
		}
		if len(result) > 0 || timeout <= 0 {
			if result == nil {
				result = []json.RawMessage{}
			}
			writeResult(w, result)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			timeout = 0 // answer with whatever there is (nothing) on the next round
		case <-r.Context().Done():
			return
		case <-s.closed:
			writeResult(w, []json.RawMessage{})
			return
		}
	}
}

// dropUnwantedLocked forgets updates of a kind the bot's allowed_updates
// leaves out, as Telegram never stores them. An empty list means every
// kind but chat_member and the reactions. Call with s.mu held.
func (s *Server) dropUnwantedLocked() {
	if s.allowed == nil {
		return
	}
	kept := s.updates[:0]
	for _, u := range s.updates {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(u.raw, &m)
		want := false
		for k := range m {
			switch {
			case k == "update_id":
			case len(s.allowed) == 0:
				want = want || (k != "chat_member" && k != "message_reaction" && k != "message_reaction_count")
			default:
				want = want || slices.Contains(s.allowed, k)
			}
		}
		if want {
			kept = append(kept, u)
		}
	}
	s.updates = kept
}

func (s *Server) sendMessage(w http.ResponseWriter, p params, token string) {
	s.mu.Lock()
	if s.failN > 0 && s.failAfter > 0 {
		s.failAfter--
	} else if s.failN > 0 {
		s.failN--
		code, retry := s.failCode, s.failRetry
		s.mu.Unlock()
		writeError(w, code, describe(code, retry), retry)
		return
	}
	s.mu.Unlock()

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
	s.mu.Lock()
	newID, gone := s.migrated[chatID]
	s.mu.Unlock()
	if gone {
		writeErrorParams(w, http.StatusBadRequest, "Bad Request: group chat was upgraded to a supergroup chat", map[string]any{"migrate_to_chat_id": newID})
		return
	}
	visible, kb, ok := textAndKeyboard(w, p)
	if !ok {
		return
	}

	s.mu.Lock()
	s.msgIDs[chatID]++
	m := SentMessage{
		ChatID: chatID, ThreadID: int(thread), MessageID: s.msgIDs[chatID], Text: p["text"], Visible: visible,
		ParseMode: p["parse_mode"], Keyboard: kb, Token: token, Time: time.Now(),
	}
	s.sent = append(s.sent, m)
	msg := s.messageJSONLocked(m)
	s.notifyLocked()
	s.mu.Unlock()
	writeResult(w, msg)
}

func (s *Server) chatTypeLocked(chatID int64) string {
	if t, ok := s.chatTypes[chatID]; ok {
		return t
	}
	if chatID > 0 {
		return "private"
	}
	return "supergroup"
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true, "record_voice": true,
	"upload_voice": true, "upload_document": true, "choose_sticker": true, "find_location": true,
	"record_video_note": true, "upload_video_note": true,
}

func (s *Server) sendChatAction(w http.ResponseWriter, p params) {
	chatID, err := p.int64("chat_id")
	if err != nil || chatID == 0 {
		writeError(w, http.StatusBadRequest, "Bad Request: chat not found", 0)
		return
	}
	thread, _ := p.int64("message_thread_id")
	action := p["action"]
	if !chatActions[action] {
		writeError(w, http.StatusBadRequest, "Bad Request: wrong parameter action in request", 0)
		return
	}
	s.mu.Lock()
	s.actions = append(s.actions, ChatAction{ChatID: chatID, ThreadID: int(thread), Action: action, Time: time.Now()})
	s.notifyLocked()
	s.mu.Unlock()
	writeResult(w, true)
}

var commandName = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func (s *Server) setMyCommands(w http.ResponseWriter, p params) {
	var cmds []Command
	if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: can't parse commands JSON object", 0)
		return
	}
	for _, c := range cmds {
		if !commandName.MatchString(c.Command) || c.Description == "" || utf16Len(c.Description) > 256 {
			writeError(w, http.StatusBadRequest, "Bad Request: BOT_COMMAND_INVALID", 0)
			return
		}
	}
	scope, err := commandScope(p)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	s.mu.Lock()
	s.commands[scope] = cmds
	s.notifyLocked()
	s.mu.Unlock()
	writeResult(w, true)
}

func (s *Server) deleteMyCommands(w http.ResponseWriter, p params) {
	scope, err := commandScope(p)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request: "+err.Error(), 0)
		return
	}
	s.mu.Lock()
	delete(s.commands, scope)
	s.notifyLocked()
	s.mu.Unlock()
	writeResult(w, true)
}

// commandScope names the scope parameter of a command-menu call as
// CommandsFor takes it: "default" without one, "chat:<id>" for a chat,
// else the scope's type.
func commandScope(p params) (string, error) {
	raw := p["scope"]
	if raw == "" {
		return "default", nil
	}
	var sc struct {
		Type   string          `json:"type"`
		ChatID json.RawMessage `json:"chat_id"`
	}
	if err := json.Unmarshal([]byte(raw), &sc); err != nil || sc.Type == "" {
		return "", errors.New("can't parse BotCommandScope")
	}
	switch sc.Type {
	case "default", "all_private_chats", "all_group_chats", "all_chat_administrators":
		return sc.Type, nil
	case "chat", "chat_administrators", "chat_member":
		id := strings.Trim(string(sc.ChatID), `"`)
		if _, err := strconv.ParseInt(id, 10, 64); err != nil {
			return "", errors.New("chat not found")
		}
		return sc.Type + ":" + id, nil
	}
	return "", errors.New("unsupported BotCommandScope type")
}

func describe(code, retryAfter int) string {
	switch code {
	case http.StatusTooManyRequests:
		return fmt.Sprintf("Too Many Requests: retry after %d", retryAfter)
	case http.StatusBadRequest:
		return "Bad Request: injected failure"
	case http.StatusForbidden:
		return "Forbidden: bot was blocked by the user"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusConflict:
		return "Conflict: terminated by other getUpdates request"
	default:
		if code >= 500 {
			return "Internal Server Error"
		}
		return http.StatusText(code)
	}
}

// ---- wire helpers ----

func writeResult(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeError(w http.ResponseWriter, code int, description string, retryAfter int) {
	var p map[string]any
	if retryAfter > 0 {
		p = map[string]any{"retry_after": retryAfter}
	}
	writeErrorParams(w, code, description, p)
}

func writeErrorParams(w http.ResponseWriter, code int, description string, parameters map[string]any) {
	body := map[string]any{"ok": false, "error_code": code, "description": description}
	if parameters != nil {
		body["parameters"] = parameters
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// params are a request's parameters, whatever the encoding, as strings (objects and
// arrays as their JSON text), the way the Bot API treats them.
type params map[string]string

func (p params) int64(key string) (int64, error) {
	v, ok := p[key]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", key, err)
	}
	return n, nil
}

const maxBody = 50 << 20

func readParams(r *http.Request) (params, error) {
	p := params{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	if r.Body == nil {
		return p, nil
	}
	ct := r.Header.Get("Content-Type")
	mediaType, _, _ := strings.Cut(ct, ";")
	switch strings.TrimSpace(strings.ToLower(mediaType)) {
	case "application/json":
		var m map[string]json.RawMessage
		dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("can't parse JSON object")
		}
		for k, raw := range m {
			var str string
			if json.Unmarshal(raw, &str) == nil {
				p[k] = str
			} else {
				p[k] = string(raw)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(maxBody); err != nil {
			// The go-telegram/bot client sends an empty body for methods without
			// parameters (getMe); that is not an error.
			if errors.Is(err, http.ErrNotMultipart) || strings.Contains(err.Error(), "EOF") {
				return p, nil
			}
			return nil, fmt.Errorf("can't parse multipart form: %w", err)
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, fmt.Errorf("can't parse form: %w", err)
		}
		for k, v := range r.PostForm {
			p[k] = v[0]
		}
	}
	return p, nil
}
