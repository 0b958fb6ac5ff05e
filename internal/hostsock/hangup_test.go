package hostsock

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clawpen/clawpen/internal/domain"
	"github.com/clawpen/clawpen/internal/fakellm"
)

// usageClock is the day every test here counts in.
var usageClock = func() time.Time { return time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC) }

const usageDay = "2026-05-04"

// modelBody is a request of either API (they share these fields).
func modelBody(stream bool, maxTokens int, prompt string) string {
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": prompt}}})
	return string(b)
}

// readThenHangUp posts body to path, reads the answer up to the first line
// holding marker, and hangs up.
func readThenHangUp(t *testing.T, hc *http.Client, path, body, marker string) {
	t.Helper()
	resp, err := hc.Post("http://clawpen"+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), marker) {
	}
	require.NoError(t, sc.Err())
	require.NoError(t, resp.Body.Close(), "closed before its end: the connection goes")
}

// hangUpBeforeTheAnswer posts body to path and hangs up once the provider
// has the request (seen), before any answer.
func hangUpBeforeTheAnswer(t *testing.T, hc *http.Client, path, body string, seen func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://clawpen"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, seen, 30*time.Second, 5*time.Millisecond, "the provider never got the request")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// The provider bills an answer whether or not the sandbox reads it to the
// end: hung up on after its first text or before it began, streamed or
// not, in both APIs, the answer's whole usage is recorded (the proxy reads
// on without the sandbox). Close waits for it.
func TestHangupIsChargedInFull(t *testing.T) {
	llm := fakellm.New()
	t.Cleanup(llm.Close)
	const (
		dripping = "USAGE 5000 700 DRIP 20ms REPLY_LONG 400" // text comes for a while
		slow     = "USAGE 5000 700 SLEEP 300ms REPLY late"   // the answer starts late
	)
	for _, tc := range []struct {
		name, path, body string
		marker           string // hang up after the line holding it; "" before the answer
	}{
		{"anthropic stream after the first text", "/v1/messages", modelBody(true, 1000, dripping), "text_delta"},
		{"openai stream after the first text", "/v1/chat/completions", modelBody(true, 1000, dripping), `"content":"Parag`},
		{"anthropic stream before the answer", "/v1/messages", modelBody(true, 1000, slow), ""},
		{"anthropic before the answer", "/v1/messages", modelBody(false, 1000, slow), ""},
		{"openai before the answer", "/v1/chat/completions", modelBody(false, 1000, slow), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBook()
			s, hc := listen(t, Config{
				Anthropic: Upstream{BaseURL: llm.URL()}, OpenAI: Upstream{BaseURL: llm.URL() + "/v1"},
				Model: hostModel, Usage: b, Now: usageClock, TZ: time.UTC,
			})
			before := len(llm.Requests())
			if tc.marker != "" {
				readThenHangUp(t, hc, tc.path, tc.body, tc.marker)
			} else {
				hangUpBeforeTheAnswer(t, hc, tc.path, tc.body, func() bool { return len(llm.Requests()) > before })
			}
			require.NoError(t, s.Close())
			assert.Equal(t, domain.Usage{Group: "team", Day: usageDay, Input: 5000, Output: 700, Requests: 1}, b.get("team", usageDay))
		})
	}
}

// sseProvider answers every request with message_start (10 input tokens)
// and a first text chunk, then runs rest, which may send more events;
// ended hears of each answer that is over.
func sseProvider(t *testing.T, rest func(ctx context.Context, send func(data string) error)) (string, <-chan struct{}) {
	ended := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(data string) error {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
				return err
			}
			return http.NewResponseController(w).Flush()
		}
		_ = send(`{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}`)
		_ = send(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"first"}}`)
		rest(r.Context(), send)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ended
}

const textChunk = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"more"}}`

// An answer still coming after its sandbox left is read for DrainTimeout
// and DrainBytes at most; cut there, it is charged the input it reported
// and its max_tokens (what the provider may have written), and the
// provider's connection is let go.
func TestDrainStopsAtItsLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  Limits
		rest func(ctx context.Context, send func(string) error)
	}{
		{"a provider that stalls", Limits{DrainTimeout: time.Millisecond}, func(ctx context.Context, _ func(string) error) {
			<-ctx.Done()
		}},
		{"a provider that never ends", Limits{DrainBytes: 64 << 10}, func(ctx context.Context, send func(string) error) {
			for send(textChunk) == nil {
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, ended := sseProvider(t, tc.rest)
			b := newBook()
			s, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up}, Model: hostModel, Usage: b, Now: usageClock, Limits: tc.lim})
			readThenHangUp(t, hc, "/v1/messages", modelBody(true, 100, "hi"), "first")
			require.NoError(t, s.Close())
			<-ended
			assert.Equal(t, domain.Usage{Group: "team", Day: usageDay, Input: 10, Output: 100, Requests: 1}, b.get("team", usageDay))
		})
	}
}

// Answers read after their sandbox left hold none of the socket's
// connections: with two connections, three hang-ups on stalled answers
// leave room for the next request. At most MaxDrains are read at once;
// one more is cut and charged its worst case.
func TestDrainsHoldNoConnection(t *testing.T) {
	more, finish := make(chan struct{}), make(chan struct{})
	up, _ := sseProvider(t, func(ctx context.Context, send func(string) error) {
		<-more
		_ = send(textChunk)
		<-finish
		_ = send(`{"type":"message_delta","usage":{"output_tokens":42}}`)
		_ = send(`{"type":"message_stop"}`)
	})
	b := newBook()
	ipc := func(context.Context, domain.Caller, string, []byte) (int, any) {
		return http.StatusOK, map[string]bool{"ok": true}
	}
	s, hc := listen(t, Config{Anthropic: Upstream{BaseURL: up}, Model: hostModel, Usage: b, Now: usageClock, IPC: ipc,
		Limits: Limits{MaxConns: 2, MaxDrains: 2}})
	for range 3 {
		readThenHangUp(t, hc, "/v1/messages", modelBody(true, 100, "hi"), "first")
	}
	// Two clients, each keeping its connection: both connections are
	// answered, so none is left to the three (whose answers stall).
	for range 2 {
		resp, err := socketClient(s.Path()).Post("http://clawpen/ipc/ping", "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body) // read to its end: the connection stays
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}

	close(more) // every answer goes on, the sandbox gone: two are read, one is cut
	require.Eventually(t, func() bool { return b.get("team", usageDay).Requests == 1 }, 30*time.Second, 5*time.Millisecond)
	assert.Equal(t, domain.Usage{Group: "team", Day: usageDay, Input: 10, Output: 100, Requests: 1}, b.get("team", usageDay))
	close(finish)
	require.NoError(t, s.Close())
	assert.Equal(t, domain.Usage{Group: "team", Day: usageDay, Input: 30, Output: 42 + 42 + 100, Requests: 3}, b.get("team", usageDay))
}
