// Package fakellm is a fake model provider for tests: it speaks the Anthropic
// Messages API (POST /v1/messages, JSON and SSE streaming) and the OpenAI chat
// completions API (POST /v1/chat/completions) on the wire, so the official SDKs
// talk to it unchanged. Its answers follow a deterministic script driven by the
// conversation (see script.go), which lets end-to-end tests make an agent use tools.
package fakellm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Server is a running fake provider. It is also an http.Handler, so it can be
// served on any listener (a unix socket, for instance).
type Server struct {
	mu          sync.Mutex
	requests    []Request
	requiredKey string
	failLeft    int
	failStatus  int
	seq         int

	ts   *httptest.Server // set by New
	hs   *http.Server     // set by Start
	ln   net.Listener
	url  string
	done chan struct{}
}

// NewHandler returns a Server that is not listening anywhere; serve it yourself.
func NewHandler() *Server {
	return &Server{}
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

// FailNext makes the next n requests fail with status and the provider's error JSON.
func (s *Server) FailNext(n int, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failStatus = n, status
}

// Requests returns a copy of every request received so far, in order.
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
	}
	key := s.requiredKey
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
	if ans.sleep > 0 {
		select {
		case <-time.After(ans.sleep):
		case <-r.Context().Done():
			return // the client went away (killed host); nothing to answer
		}
	}
	switch {
	case api == openaiAPI && req.Stream:
		writeError(w, api, http.StatusBadRequest, "fakellm: streaming chat completions are not supported")
	case api == openaiAPI:
		writeOpenAI(w, req, ans, seq)
	case req.Stream:
		writeAnthropicStream(w, req, ans, seq)
	default:
		writeAnthropic(w, req, ans, seq)
	}
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
