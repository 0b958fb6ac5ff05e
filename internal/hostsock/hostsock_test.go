package hostsock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
)

const hostKey = "sk-host-SECRET-0123456789"

// hostModel is the model the host configures; requests name others.
const hostModel = "claude-host"

// minimalMessages is the smallest valid Messages API body.
const minimalMessages = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

var teamID = domain.Caller{Group: "team", ChatID: -100123, IsMain: false, Run: "inv-1"}

// socketClient is an HTTP client whose every connection goes to the socket,
// like the agent's inside the sandbox.
func socketClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

func listen(t testing.TB, cfg Config) (*Server, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	s, err := Listen(filepath.Join(dir, "sockets", "inv-1.sock"), -1, -1, teamID, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, socketClient(s.Path())
}

// recorded is what the fake provider saw.
type recorded struct {
	mu      sync.Mutex
	headers []http.Header
	paths   []string
	bodies  []string
}

func (r *recorded) add(req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = append(r.headers, req.Header.Clone())
	r.paths = append(r.paths, req.URL.RequestURI())
	r.bodies = append(r.bodies, string(b))
}

func (r *recorded) last() (http.Header, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.headers) - 1
	return r.headers[n], r.paths[n], r.bodies[n]
}

const messageJSON = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",` +
	`"content":[{"type":"text","text":"hello from upstream"}],"stop_reason":"end_turn",` +
	`"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":4}}`

// fakeAnthropic speaks the Messages API: JSON for plain requests, server-sent
// events for "stream": true. Between the first event and the rest it waits for
// proceed, so a test can tell whether events arrive as they are sent.
func fakeAnthropic(t *testing.T, rec *recorded, proceed <-chan struct{}, stalled *bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = io.Copy(&body, r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
		rec.add(r)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body.Bytes(), &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, messageJSON)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(event, data string) {
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
			w.(http.Flusher).Flush()
		}
		send("message_start", `{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0}}}`)
		select {
		case <-proceed:
		case <-time.After(10 * time.Second):
			*stalled = true // the client never saw the first event
		}
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`)
		send("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`)
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)
		send("message_stop", `{"type":"message_stop"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model("claude-test"),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

func TestAnthropicMessagesNew(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	s, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel})

	tests := []struct {
		name string
		opts []aoption.RequestOption
	}{
		{"sandbox sends a fake key and token", []aoption.RequestOption{
			aoption.WithAPIKey("sk-sandbox-stolen"),
			aoption.WithHeader("Authorization", "Bearer sandbox-token"),
			aoption.WithHeader("Cookie", "session=abc"),
			aoption.WithHeader("Proxy-Authorization", "Basic eDp5"),
		}},
		{"sandbox sends no credentials", []aoption.RequestOption{aoption.WithoutEnvironmentDefaults()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]aoption.RequestOption{
				aoption.WithBaseURL("http://clawpen"),
				aoption.WithHTTPClient(hc),
				aoption.WithMaxRetries(0),
			}, tc.opts...)
			client := anthropic.NewClient(opts...)
			msg, err := client.Messages.New(context.Background(), messageParams())
			require.NoError(t, err)
			require.Len(t, msg.Content, 1)
			assert.Equal(t, "hello from upstream", msg.Content[0].Text)

			h, path, body := rec.last()
			assert.Equal(t, "/v1/messages", path)
			assert.Equal(t, []string{hostKey}, h.Values("X-Api-Key"))
			assert.Empty(t, h.Values("Authorization"))
			assert.Empty(t, h.Values("Cookie"))
			assert.Empty(t, h.Values("Proxy-Authorization"))
			assert.Equal(t, "2023-06-01", h.Get("Anthropic-Version"))
			assert.Contains(t, body, `"model":"`+hostModel+`"`)
			assert.NotContains(t, body, "claude-test", "the requested model is replaced")
		})
	}
	_ = s
}

func TestAnthropicStreamingIsIncremental(t *testing.T) {
	rec := &recorded{}
	proceed := make(chan struct{})
	stalled := false
	up := fakeAnthropic(t, rec, proceed, &stalled)
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel})
	client := anthropic.NewClient(aoption.WithBaseURL("http://clawpen"), aoption.WithHTTPClient(hc),
		aoption.WithAPIKey("sk-sandbox"), aoption.WithMaxRetries(0))

	stream := client.Messages.NewStreaming(context.Background(), messageParams())
	defer stream.Close()
	// The upstream holds back everything after message_start until proceed:
	// receiving it first proves the proxy does not buffer.
	require.True(t, stream.Next(), "first event: %v", stream.Err())
	assert.Equal(t, "message_start", string(stream.Current().Type))
	close(proceed)

	var msg anthropic.Message
	require.NoError(t, msg.Accumulate(stream.Current()))
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	assert.False(t, stalled, "the first event was held back by the proxy")
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello", msg.Content[0].Text)
	h, _, _ := rec.last()
	assert.Equal(t, []string{hostKey}, h.Values("X-Api-Key"))
}

func TestAnthropicHeadersAndRoutes(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL + "/base", APIKey: hostKey}, Model: hostModel})

	tests := []struct {
		name, path, accept   string
		wantPath, wantAccept string
	}{
		{"messages", "/v1/messages", "application/json", "/base/v1/messages", "application/json"},
		{"query dropped", "/v1/messages?beta=true", "text/event-stream", "/base/v1/messages", "text/event-stream"},
		{"count tokens", "/v1/messages/count_tokens", "*/*", "/base/v1/messages/count_tokens", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://clawpen"+tc.path, strings.NewReader(minimalMessages))
			require.NoError(t, err)
			req.Header.Set("Accept", tc.accept)
			// Whatever the sandbox sets besides the media types stays behind.
			req.Header.Set("Anthropic-Version", "2099-01-01")
			req.Header.Set("Anthropic-Beta", "web-fetch-2025-09-10,mcp-client-2025-04-04")
			req.Header.Set("X-Stainless-Lang", "go")
			req.Header.Set("Idempotency-Key", "k1")
			req.Header.Set("Te", "trailers")
			req.Header.Set("Connection", "X-Secret-Hop")
			req.Header.Set("X-Secret-Hop", "hop")
			resp, err := hc.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			h, path, body := rec.last()
			assert.Equal(t, tc.wantPath, path)
			assert.Equal(t, "2023-06-01", h.Get("Anthropic-Version"), "the host's version, not the sandbox's")
			assert.Equal(t, tc.wantAccept, h.Get("Accept"))
			for name := range h {
				switch name {
				case "Content-Type", "Content-Length", "Accept", "Accept-Encoding", "Anthropic-Version", "X-Api-Key":
				default:
					t.Errorf("header %s reached the provider: %q", name, h.Values(name))
				}
			}
			assert.Contains(t, body, `"model":"`+hostModel+`"`)
		})
	}
}

func TestOpenAI(t *testing.T) {
	rec := &recorded{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test",`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi there"}}]}`)
	}))
	defer up.Close()

	t.Run("configured", func(t *testing.T) {
		_, hc := listen(t, Config{OpenAI: Upstream{BaseURL: up.URL + "/v1", APIKey: hostKey}, Model: hostModel})
		client := openai.NewClient(ooption.WithBaseURL("http://clawpen/v1/"), ooption.WithHTTPClient(hc),
			ooption.WithAPIKey("sk-sandbox"), ooption.WithMaxRetries(0))
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "gpt-test",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		require.NoError(t, err)
		require.Len(t, resp.Choices, 1)
		assert.Equal(t, "hi there", resp.Choices[0].Message.Content)
		h, path, body := rec.last()
		assert.Equal(t, "/v1/chat/completions", path)
		assert.Contains(t, body, `"model":"`+hostModel+`"`)
		assert.Equal(t, []string{"Bearer " + hostKey}, h.Values("Authorization"))
		assert.Empty(t, h.Get("X-Api-Key"))
	})

	t.Run("not configured", func(t *testing.T) {
		_, hc := listen(t, Config{})
		resp, err := hc.Post("http://clawpen/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		require.NoError(t, err)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
		assert.Equal(t, map[string]string{"error": "no OpenAI-compatible provider is configured"}, decodeJSON(t, resp))
	})
}

func decodeJSON(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var m map[string]string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
	return m
}

func TestIPC(t *testing.T) {
	type call struct {
		id   domain.Caller
		op   string
		body string
	}
	var calls []call
	var mu sync.Mutex
	ipc := func(_ context.Context, id domain.Caller, op string, body []byte) (int, any) {
		mu.Lock()
		calls = append(calls, call{id, op, string(body)})
		mu.Unlock()
		switch op {
		case "send_message":
			return http.StatusOK, map[string]any{"ok": true}
		case "register_group":
			return http.StatusForbidden, map[string]string{"error": "denied: only the main group can register groups"}
		case "nothing":
			return 0, nil
		}
		return http.StatusNotFound, map[string]string{"error": fmt.Sprintf("unknown operation %q", op)}
	}
	// The provider is never reached: only a refused request goes to it.
	_, hc := listen(t, Config{IPC: ipc, Anthropic: Upstream{BaseURL: "http://127.0.0.1:9"}})

	tests := []struct {
		name       string
		method     string
		path, body string
		wantStatus int
		wantBody   string
		wantCall   bool
	}{
		{"identity from the socket, not the body", "POST", "/ipc/send_message",
			`{"text":"hi","group":"main","chat_id":1,"is_main":true}`, 200, `{"ok":true}`, true},
		{"refusal passes through", "POST", "/ipc/register_group", `{"chat_id":5}`, 403,
			`{"error":"denied: only the main group can register groups"}`, true},
		{"nil response", "POST", "/ipc/nothing", ``, 200, `{}`, true},
		{"malformed JSON", "POST", "/ipc/send_message", `{"text":`, 400, `{"error":"body is not valid JSON"}`, false},
		{"oversize", "POST", "/ipc/send_message", `{"text":"` + strings.Repeat("a", int(DefaultLimits.MaxIPCBytes)) + `"}`, 413,
			fmt.Sprintf(`{"error":"body larger than %d bytes"}`, DefaultLimits.MaxIPCBytes), false},
		{"bad operation name", "POST", "/ipc/a/b", `{}`, 404, `{"error":"unknown operation \"a/b\""}`, false},
		{"wrong method", "GET", "/ipc/send_message", ``, 405, `{"error":"method GET not allowed; use POST"}`, false},
		{"unknown path", "POST", "/etc/passwd", ``, 404, `{"error":"no such endpoint: /etc/passwd"}`, false},
		{"bare ipc", "POST", "/ipc/", ``, 404, `{"error":"no such endpoint: /ipc/"}`, false},
		{"proxy wrong method", "GET", "/v1/messages", ``, 405, `{"error":"method GET not allowed; use POST"}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			before := len(calls)
			mu.Unlock()
			req, err := http.NewRequest(tc.method, "http://clawpen"+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			// Whatever the request claims about itself is ignored.
			req.Header.Set("X-Clawpen-Group", "main")
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, resp.StatusCode)
			assert.JSONEq(t, tc.wantBody, string(got))
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			mu.Lock()
			defer mu.Unlock()
			if !tc.wantCall {
				assert.Len(t, calls, before)
				return
			}
			require.Len(t, calls, before+1)
			c := calls[before]
			assert.Equal(t, teamID, c.id)
			assert.Equal(t, strings.TrimPrefix(tc.path, "/ipc/"), c.op)
			assert.Equal(t, tc.body, c.body)
		})
	}
}

func TestAnthropicNotConfigured(t *testing.T) {
	_, hc := listen(t, Config{Model: hostModel})
	resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": "no Anthropic provider is configured"}, decodeJSON(t, resp))
}

func TestIPCNotConfigured(t *testing.T) {
	_, hc := listen(t, Config{})
	resp, err := hc.Post("http://clawpen/ipc/send_message", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": `unknown operation "send_message"`}, decodeJSON(t, resp))
}

func TestProxyBodyCap(t *testing.T) {
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	_, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up.URL, APIKey: hostKey}, Model: hostModel, Limits: Limits{MaxModelBytes: 100}})
	resp, err := hc.Post("http://clawpen/v1/messages", "application/json", strings.NewReader(strings.Repeat("x", 101)))
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, map[string]string{"error": "body larger than 100 bytes"}, decodeJSON(t, resp))
	rec.mu.Lock()
	assert.Empty(t, rec.paths, "nothing reached the provider")
	rec.mu.Unlock()
}

func TestKeyNeverLeaks(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := &recorded{}
	up := fakeAnthropic(t, rec, nil, new(bool))
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // an unreachable provider

	for _, base := range []string{up.URL, downURL} {
		_, hc := listen(t, Config{
			Anthropic: Upstream{BaseURL: base, APIKey: hostKey},
			OpenAI:    Upstream{BaseURL: downURL, APIKey: hostKey},
			Model:     hostModel,
			Logger:    logger,
		})
		for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
			resp, err := hc.Post("http://clawpen"+path, "application/json", strings.NewReader(minimalMessages))
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.NotContains(t, string(body), hostKey)
			for _, vs := range resp.Header {
				for _, v := range vs {
					assert.NotContains(t, v, hostKey)
				}
			}
			if base == downURL || path == "/v1/chat/completions" {
				assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
			}
		}
	}
	assert.Contains(t, logs.String(), "provider request failed", "the failures were logged")
	assert.NotContains(t, logs.String(), hostKey)
	assert.NotContains(t, logs.String(), "SECRET")
}

func TestSocketFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run", "inv.sock")

	s, err := Listen(path, -1, -1, teamID, Config{})
	require.NoError(t, err)
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o711), di.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary socket left behind")
	assert.Equal(t, path, s.Path())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err = os.Lstat(path)
	assert.True(t, os.IsNotExist(err), "Close removes the socket")

	// A stale socket from a crash is replaced.
	stale, err := net.Listen("unix", path)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())
	s, err = Listen(path, -1, -1, teamID, Config{})
	require.NoError(t, err)
	resp, err := socketClient(path).Post("http://clawpen/nowhere", "application/json", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.NoError(t, s.Close())

	// Anything else at the path is left alone.
	require.NoError(t, os.WriteFile(path, []byte("data"), 0o644))
	_, err = Listen(path, -1, -1, teamID, Config{})
	require.ErrorContains(t, err, "not a socket")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "data", string(b))
}

// A data dir deep enough that its socket's path is longer than bind(2)
// takes (107 bytes) still gets its socket, at that path.
func TestSocketInALongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-project-directory/", 8))
	path := filepath.Join(dir, "sockets", "0123456789abcdef", "host.sock")
	require.Greater(t, len(path), 200)

	s, err := Listen(path, -1, -1, teamID, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary socket left behind")

	// A client reaches it as a sandbox does: through a short path to the
	// same file (the bind mount there; a directory descriptor here).
	d, err := os.Open(filepath.Dir(path))
	require.NoError(t, err)
	defer d.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/host.sock", d.Fd())
	resp, err := socketClient(short).Post("http://clawpen/nowhere", "application/json", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestSocketOwnedBySandboxUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "inv.sock")
	s, err := Listen(path, 1000, 1000, teamID, Config{})
	require.NoError(t, err)
	defer s.Close()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, uint32(1000), st.Uid)
	assert.Equal(t, uint32(1000), st.Gid)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	_, err := Listen(filepath.Join(dir, "a.sock"), -1, -1, teamID, Config{Anthropic: Upstream{BaseURL: "ftp://x"}})
	require.Error(t, err)
	_, err = Listen(filepath.Join(dir, "b.sock"), -1, -1, teamID, Config{OpenAI: Upstream{BaseURL: "::bad"}})
	require.Error(t, err)
}
