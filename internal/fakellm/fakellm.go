// Package fakellm is a fake model provider for tests: it speaks the Anthropic
// Messages API (POST /v1/messages, JSON and SSE streaming), the OpenAI chat
// completions API (POST /v1/chat/completions, JSON and SSE streaming), the
// audio transcription API (POST /v1/audio/transcriptions, transcribe.go), with
// the token usage of every answer as the providers report it, and both lists of models (GET
// /v1/models) on the wire, so the official SDKs talk to it unchanged. Its answers follow a deterministic script driven by the
// conversation (see script.go), which lets end-to-end tests make an agent use tools.
package fakellm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/clawpen/clawpen/internal/retry"
)

// Server is a running fake provider. It is also an http.Handler, so it can be
// served on any listener (a unix socket, for instance).
type Server struct {
	mu          sync.Mutex
	requests    []Request
	requiredKey string
	models      []string // what GET /v1/models lists
	failLeft    int
	failStatus  int
	seq         int
	firstText   func(at time.Time) // see OnFirstText

	transcribeKey  string
	transcriptions []Transcription
	failSummaries  int

	ts   *httptest.Server // set by New
	hs   *http.Server     // set by Start
	ln   net.Listener
	url  string
	done chan struct{}
}

// defaultModels are the models a new Server lists: every model name the
// tests configure, and one dated id as Anthropic lists them.
var defaultModels = []string{"claude-test", "claude-sonnet-4-5-20250929", "gpt-4.1-mini"}

// NewHandler returns a Server that is not listening anywhere; serve it yourself.
func NewHandler() *Server {
	return &Server{models: slices.Clone(defaultModels)}
}

// New starts a Server on a random local port.
func New() *Server {
	s := NewHandler()
	s.ts = httptest.NewServer(s)
	s.url = s.ts.URL
	return s
}

// Start serves on addr (host:port, ":0" for a random port) until Close.
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakellm: listen %s: %w", addr, err)
	}
	s := NewHandler()
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.hs.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// URL is the base URL (no trailing slash); the Anthropic SDK takes it as is,
// the OpenAI SDK wants URL()+"/v1/".
func (s *Server) URL() string { return s.url }

// Close stops the server and drops open connections (sleeping answers end).
func (s *Server) Close() {
	switch {
	case s.ts != nil:
		s.ts.CloseClientConnections()
		s.ts.Close()
	case s.hs != nil:
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.hs.Shutdown(ctx); err != nil {
			_ = s.hs.Close()
		}
		<-s.done
	}
}

// SetRequiredKey makes every request without this key fail with 401
// (x-api-key for /v1/messages, "Authorization: Bearer" for chat completions).
// An empty key accepts everything.
func (s *Server) SetRequiredKey(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requiredKey = k
}

// SetModels sets the model ids GET /v1/models lists (by default
// claude-test, claude-sonnet-4-5-20250929 and gpt-4.1-mini); the server
// answers any model whatever it lists.
func (s *Server) SetModels(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = ids
}

// OnFirstText makes every streamed answer with text call f with the time
// its first text chunk was flushed to the client: where a draft's latency
// starts (clawpen-bench). nil stops it.
func (s *Server) OnFirstText(f func(at time.Time)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.firstText = f
}

// FailSummaries makes the next n summary requests (see script.go) fail
// with 400, and no other request.
func (s *Server) FailSummaries(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSummaries = n
}

// FailNext makes the next n requests fail with status and the provider's error JSON.
func (s *Server) FailNext(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failStatus = n, status
}

// Requests returns a copy of every model request (messages, chat
// completions) received so far, in order; listings of models are not.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api apiKind
	switch r.URL.Path {
	case "/v1/models":
		s.serveModels(w, r)
		return
	case "/v1/audio/transcriptions":
		s.serveTranscription(w, r)
		return
	case "/v1/messages":
		api = anthropicAPI
	case "/v1/chat/completions":
		api = openaiAPI
	default:
		writeError(w, anthropicAPI, http.StatusNotFound, "not found: "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, api, http.StatusMethodNotAllowed, "method not allowed")
		return
	}

	req, decodeErr := decodeRequest(r, api)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.seq++
	seq := s.seq
	failing := s.failLeft > 0
	status := s.failStatus
	if failing {
		s.failLeft--
	} else if s.failSummaries > 0 && isSummary(req.Messages) {
		s.failSummaries--
		failing, status = true, http.StatusBadRequest
	}
	key := s.requiredKey
	firstText := s.firstText
	s.mu.Unlock()

	if failing {
		// The SDKs honour retry-after-ms; a short one keeps retry tests fast.
		w.Header().Set("Retry-After-Ms", "10")
		writeError(w, api, status, fmt.Sprintf("injected failure (status %d)", status))
		return
	}
	if key != "" && !hasKey(r, api, key) {
		writeError(w, api, http.StatusUnauthorized, "invalid x-api-key")
		return
	}
	if decodeErr != nil {
		writeError(w, api, http.StatusBadRequest, decodeErr.Error())
		return
	}
	if api == anthropicAPI {
		if err := checkToolPairing(req.Messages); err != nil {
			writeError(w, api, http.StatusBadRequest, err.Error())
			return
		}
	}

	ans, err := plan(req.Messages)
	if err != nil {
		writeError(w, api, http.StatusBadRequest, err.Error())
		return
	}
	ans.firstText = firstText
	if retry.Sleep(r.Context(), ans.sleep) != nil {
		return // the client went away (killed host); nothing to answer
	}
	switch {
	case api == openaiAPI && req.Stream:
		writeOpenAIStream(r.Context(), w, req, ans, seq)
	case api == openaiAPI:
		writeOpenAI(w, req, ans, seq)
	case req.Stream:
		writeAnthropicStream(r.Context(), w, req, ans, seq)
	default:
		writeAnthropic(w, req, ans, seq)
	}
}

// serveModels answers GET /v1/models as the provider the request is for
// does: Anthropic's (x-api-key, anthropic-version required) or OpenAI's
// (a bearer key, or none for a key-less server).
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	api := openaiAPI
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "" {
		api = anthropicAPI
	}
	if r.Method != http.MethodGet {
		writeError(w, api, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	s.mu.Lock()
	key, ids := s.requiredKey, s.models
	s.mu.Unlock()
	if key != "" && !hasKey(r, api, key) {
		msg := "invalid x-api-key"
		if api == openaiAPI {
			msg = "Incorrect API key provided"
		}
		writeError(w, api, http.StatusUnauthorized, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	created := time.Date(2025, 9, 29, 0, 0, 0, 0, time.UTC)
	if api == openaiAPI {
		data := []map[string]any{}
		for _, id := range ids {
			data = append(data, map[string]any{"id": id, "object": "model", "created": created.Unix(), "owned_by": "fakellm"})
		}
		writeJSON(w, map[string]any{"object": "list", "data": data})
		return
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeError(w, api, http.StatusBadRequest, "anthropic-version: header is required")
		return
	}
	data := []map[string]any{}
	for _, id := range ids {
		data = append(data, map[string]any{"type": "model", "id": id, "display_name": id, "created_at": created.Format(time.RFC3339)})
	}
	var first, last any
	if len(ids) > 0 {
		first, last = ids[0], ids[len(ids)-1]
	}
	writeJSON(w, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
}

func hasKey(r *http.Request, api apiKind, key string) bool {
	if api == anthropicAPI {
		return r.Header.Get("X-Api-Key") == key
	}
	return r.Header.Get("Authorization") == "Bearer "+key
}

// errorTypes maps a status to the provider's error type name.
var errorTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	403: "permission_error",
	404: "not_found_error",
	405: "invalid_request_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	529: "overloaded_error",
}

func writeError(w http.ResponseWriter, api apiKind, status int, msg string) {
	typ, ok := errorTypes[status]
	if !ok {
		typ = "api_error"
	}
	if status == 529 {
		msg = "Overloaded"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake_error")
	w.WriteHeader(status)
	var body any
	if api == anthropicAPI {
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	} else {
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}}
	}
	writeJSON(w, body)
}

// errNoPrompt is returned when a conversation has no user text to answer.
var errNoPrompt = errors.New("fakellm: no user message with text in the conversation")
